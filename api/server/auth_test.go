package server_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"encoding/json"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
	"github.com/sandlot/sandlot/templates/templatestest"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/volumes"
)

func TestAuth(t *testing.T) {
	e := newEnv(t, nil)
	unknown := "e2b_" + strings.Repeat("ab", 20)
	tests := []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"none", nil, 401},
		{"malformed bearer", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"basic scheme", map[string]string{"Authorization": "Basic " + e.KeyA}, 401},
		{"unknown key", map[string]string{"X-API-KEY": unknown}, 401},
		{"bearer", map[string]string{"Authorization": "Bearer " + e.KeyA}, 200},
		{"x-api-key", map[string]string{"X-API-KEY": e.KeyA}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := e.do(t, req{method: "GET", path: "/v1/contexts", header: tt.header})
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if tt.want == 401 {
				if got := decodeErr(t, w).Code; got != errdefs.CodeUnauthenticated {
					t.Errorf("code %q", got)
				}
			}
		})
	}
	t.Run("every authenticated route", func(t *testing.T) {
		for _, rt := range e.Server.RouteInfos() {
			if !rt.Auth {
				continue
			}
			p := strings.NewReplacer("{name}", "run_code", "{id}", "x", "{conversationId}", "c", "{pathId}", "p").Replace(rt.Path)
			if w := e.do(t, req{method: rt.Method, path: p + "?path=a"}); w.Code != 401 {
				t.Errorf("%s %s without key: %d", rt.Method, rt.Path, w.Code)
			}
		}
	})
	t.Run("store down is not a 401 and leaks nothing", func(t *testing.T) {
		e.Tenants.Fail = errors.New("dial tcp 10.0.0.1:5432: refused")
		defer func() { e.Tenants.Fail = nil }()
		w := e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyB}) // not cached yet
		if w.Code != 500 || strings.Contains(w.Body.String(), "10.0.0.1") {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
}

// TestKeyCache: a deleted key stops working once the cache TTL passes.
func TestKeyCache(t *testing.T) {
	e := newEnv(t, nil)
	// A clock the test moves: on a loaded machine real time may pass the
	// TTL between two requests.
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e.Handler = server.New(server.Config{Contexts: e.Contexts, Tools: e.Tools,
		Auth: tenant.NewAuthenticator(e.Tenants, tenant.AuthConfig{CacheTTL: 50 * time.Millisecond, Clock: clock})}).Handler()
	if w := e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyA}); w.Code != 200 {
		t.Fatal(w.Code)
	}
	e.Tenants.Fail = errors.New("store down")
	if w := e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyA}); w.Code != 200 {
		t.Fatalf("cached key: %d", w.Code)
	}
	mu.Lock()
	now = now.Add(60 * time.Millisecond)
	mu.Unlock()
	if w := e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyA}); w.Code != 500 {
		t.Fatalf("after the TTL: %d", w.Code)
	}
}

// TestTenantIsolation sends tenant B's key at every route, aimed at tenant
// A's context, conversation and files. It fails when a route is added
// without a case here.
func TestTenantIsolation(t *testing.T) {
	secrets := memory.New()
	for _, id := range []string{"tenant-a", "tenant-b"} {
		secrets.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("e2b_"+id))
	}
	// A's template "app", recorded directly.
	tplA, err := secrets.CreateTemplate(context.Background(), templates.Template{TenantID: "tenant-a", Name: "app",
		Image: "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// A build FROM the built-in default (a small image here) ends at once;
	// what matters is who may see it.
	if _, err := imgs.Put(context.Background(), templatestest.Image(t, "default"), image.PutOptions{Name: templates.Default}); err != nil {
		t.Fatal(err)
	}
	cat := templates.New(templates.Config{Store: secrets, Images: imgs, Snapshots: secrets})
	emptyLayer := func(ctx context.Context, w io.Writer, max int64) error { return tar.NewWriter(w).Close() }
	vhost, err := volumes.NewHost(filepath.Join(t.TempDir(), "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	vols := volumes.NewService(secrets, vhost, volumes.Config{})
	volA, err := vols.Create(context.Background(), "tenant-a", "avol", volumes.MinSizeBytes)
	if err != nil {
		t.Fatal(err)
	}
	aVolumeIntact := func(t *testing.T) {
		t.Helper()
		if got, err := vols.Get(context.Background(), "tenant-a", volA.ID); err != nil || got.Name != "avol" {
			t.Fatalf("A's volume was touched: %+v %v", got, err)
		}
		if _, err := vhost.Usage(volA.ID); err != nil {
			t.Fatalf("A's volume's file: %v", err)
		}
	}
	// A has two keys, so that revoking one is not refused as its last.
	if err := secrets.AddKey(context.Background(), &tenant.Key{TenantID: "tenant-a", Name: "a-second"}, tenant.HashKey("e2b_tenant-a-2")); err != nil {
		t.Fatal(err)
	}
	aKeys, _ := secrets.ListKeys(context.Background(), "tenant-a")
	aKeysIntact := func(t *testing.T) {
		t.Helper()
		if got, _ := secrets.ListKeys(context.Background(), "tenant-a"); len(got) != 2 {
			t.Fatalf("A's keys were touched: %v", got)
		}
	}
	var usageAsked []string
	e := newEnv(t, func(c *server.Config) {
		c.Keys = secrets
		c.Usage = func(_ context.Context, tenantID string) ([]api.Quota, error) {
			usageAsked = append(usageAsked, tenantID)
			return nil, nil
		}
		c.Secrets = secrets
		c.Volumes = vols
		c.Templates = cat
		c.Snapshots = cat
		c.Capture = func(ctx context.Context, tenantID, contextID string, w io.Writer, max int64) error {
			return emptyLayer(ctx, w, max)
		}
		c.Builds = builds.New(builds.Config{Builder: build.New(build.Config{Store: imgs}), Images: imgs, Catalog: cat})
	})
	w := e.do(t, req{method: "POST", path: "/v1/templates/builds", key: e.KeyA, body: api.TemplateBuildRequest{Name: "built", Dockerfile: "FROM default\n"}})
	var buildA api.TemplateBuild
	if err := json.Unmarshal(w.Body.Bytes(), &buildA); err != nil || w.Code != 202 {
		t.Fatalf("A's build: %d %s", w.Code, w.Body)
	}
	aBuildIntact := func(t *testing.T) {
		t.Helper()
		if w := e.do(t, req{method: "GET", path: "/v1/templates/builds/" + buildA.BuildID, key: e.KeyA}); w.Code != 200 {
			t.Fatalf("A's build: %d %s", w.Code, w.Body)
		}
	}
	aTemplateIntact := func(t *testing.T) {
		t.Helper()
		if got, err := secrets.TemplateByID(context.Background(), tplA.ID); err != nil || got.Name != "app" || got.TenantID != "tenant-a" {
			t.Fatalf("A's template was touched: %+v %v", got, err)
		}
	}
	if w := e.do(t, req{method: "PUT", path: "/v1/secrets/gh", key: e.KeyA, body: api.SecretRequest{Value: "a-secret-value", Hosts: []string{"a.test"}}}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	aSecretIntact := func(t *testing.T) {
		t.Helper()
		got, err := secrets.GetSecrets(context.Background(), "tenant-a", []string{"gh"})
		if err != nil || got[0].Value != "a-secret-value" || got[0].Hosts[0] != "a.test" {
			t.Fatalf("A's secret was touched: %+v %v", got, err)
		}
	}
	e.Audit = append(e.Audit, audit.Event{ID: 1, TenantID: "tenant-a", Kind: audit.KindGuardFinding, Detail: map[string]string{"hmac": "a-hmac"}})
	a := e.runCode(t, e.KeyA, "conv-a", "main", "secret=hunter2")
	recs, _ := e.Contexts.List(context.Background(), contexts.Filter{TenantID: "tenant-a"})
	idA := recs[0].ID
	if w := e.do(t, req{method: "PUT", path: "/v1/contexts/" + idA + "/files?path=a.txt", key: e.KeyA, body: "A's file"}); w.Code != 200 {
		t.Fatal(w.Body)
	}
	// A's snapshot of its context, "snap-a".
	snapA, _, err := cat.Snapshot(context.Background(), "tenant-a", templates.SnapshotSpec{ContextID: idA, Template: templates.Default, Name: "snap-a"}, emptyLayer)
	if err != nil {
		t.Fatal(err)
	}
	aSnapshotIntact := func(t *testing.T) {
		t.Helper()
		if _, ss, err := cat.Snapshots(context.Background(), "tenant-a", idA); err != nil || len(ss) != 1 || ss[0].ID != snapA.ID {
			t.Fatalf("A's snapshots were touched: %+v %v", ss, err)
		}
	}
	stillIntact := func(t *testing.T) {
		t.Helper()
		rec, err := e.Contexts.Get(context.Background(), "tenant-a", idA)
		if err != nil || !rec.State.Active() {
			t.Fatalf("A's context was touched: %+v %v", rec, err)
		}
		if r := e.runCode(t, e.KeyA, "conv-a", "main", "print(secret)"); r.Stdout != "hunter2\n" || r.SandboxID != a.SandboxID {
			t.Fatalf("A's state was touched: %+v", r)
		}
		if got, _ := e.Contexts.File(idA, "/home/user/a.txt"); string(got) != "A's file" {
			t.Fatalf("A's file is now %q", got)
		}
	}
	notFound := func(t *testing.T, w *httptest.ResponseRecorder) {
		t.Helper()
		if w.Code != 404 {
			t.Fatalf("status %d, want 404: %s", w.Code, w.Body)
		}
		if strings.Contains(w.Body.String(), "hunter2") || strings.Contains(w.Body.String(), "tenant-a") {
			t.Fatalf("leak: %s", w.Body)
		}
	}
	cases := map[string]func(t *testing.T){
		"GET /healthz":         func(t *testing.T) {}, // public, no tenant data
		"GET /readyz":          func(t *testing.T) {},
		"GET /v1/openapi.json": func(t *testing.T) {},
		"GET /v1/version": func(t *testing.T) { // public: the build, nothing of a tenant
			w := e.do(t, req{method: "GET", path: "/v1/version", key: e.KeyB})
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("%v: %s", err, w.Body)
			}
			for k := range body {
				if k != "version" && k != "commit" && k != "schemaVersion" {
					t.Errorf("/v1/version answers %q: %s", k, w.Body)
				}
			}
		},
		"GET /v1/tools": func(t *testing.T) {}, // schemas only
		"GET /v1/tenant": func(t *testing.T) { // the key's own tenant, never another's
			w := e.do(t, req{method: "GET", path: "/v1/tenant", key: e.KeyB})
			var got api.TenantInfo
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if got.ID != "tenant-b" || strings.Contains(w.Body.String(), "tenant-a") {
				t.Fatalf("B's key answers %s", w.Body)
			}
		},
		"GET /v1/metrics/sessions": func(t *testing.T) {
			// Aggregates only: no ids, no identities.
			w := e.do(t, req{method: "GET", path: "/v1/metrics/sessions", key: e.KeyB})
			if w.Code != 200 || strings.Contains(w.Body.String(), "conv-a") || strings.Contains(w.Body.String(), idA) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		},
		"GET /v1/audit": func(t *testing.T) {
			w := e.do(t, req{method: "GET", path: "/v1/audit", key: e.KeyB})
			if w.Code != 200 || strings.Contains(w.Body.String(), "tenant-a") || strings.Contains(w.Body.String(), "a-hmac") {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		},
		"POST /v1/tools/{name}": func(t *testing.T) {
			r := e.runCode(t, e.KeyB, "conv-a", "main", "print(secret)")
			if r.Stdout != "\n" || r.SandboxID == a.SandboxID {
				t.Fatalf("B reached A's kernel: %+v", r)
			}
			w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyB, header: map[string]string{"Accept": api.ContentTypeNDJSON},
				body: map[string]any{"conversationId": "conv-a", "args": map[string]any{"language": "python", "code": "print(secret)"}}})
			if strings.Contains(w.Body.String(), "hunter2") {
				t.Fatalf("streamed leak: %s", w.Body)
			}
		},
		"GET /v1/contexts": func(t *testing.T) {
			for _, q := range []string{"", "?conversationId=conv-a", "?status=ready"} {
				w := e.do(t, req{method: "GET", path: "/v1/contexts" + q, key: e.KeyB})
				if w.Code != 200 || strings.Contains(w.Body.String(), idA) {
					t.Fatalf("%s: %d %s", q, w.Code, w.Body)
				}
			}
		},
		"GET /v1/contexts/{id}": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "GET", path: "/v1/contexts/" + idA, key: e.KeyB}))
		},
		"GET /v1/contexts/events": func(t *testing.T) {
			// This env has no live feed (503); TestContextEventsTenantIsolation
			// attacks the feed over a real manager.
			w := e.do(t, req{method: "GET", path: "/v1/contexts/events", key: e.KeyB})
			if w.Code == 200 || strings.Contains(w.Body.String(), idA) || strings.Contains(w.Body.String(), "conv-a") {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		},
		"PUT /v1/contexts/{id}/ttl": func(t *testing.T) {
			// No TTL setter here (503); TestSetTTL answers B 404 over a real manager.
			w := e.do(t, req{method: "PUT", path: "/v1/contexts/" + idA + "/ttl", key: e.KeyB, body: api.TTLRequest{TTLSeconds: 5}})
			if w.Code == 200 || strings.Contains(w.Body.String(), "tenant-a") {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		},
		"DELETE /v1/contexts/{id}": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "DELETE", path: "/v1/contexts/" + idA, key: e.KeyB}))
		},
		"POST /v1/contexts/{id}/suspend": func(t *testing.T) {
			// TestSuspendServe answers B 404 over a real daemon too.
			notFound(t, e.do(t, req{method: "POST", path: "/v1/contexts/" + idA + "/suspend", key: e.KeyB}))
		},
		"PUT /v1/contexts/{id}/files": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "PUT", path: "/v1/contexts/" + idA + "/files?path=a.txt", key: e.KeyB, body: "B was here"}))
		},
		"GET /v1/contexts/{id}/files": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "GET", path: "/v1/contexts/" + idA + "/files?path=a.txt", key: e.KeyB}))
		},
		"GET /v1/contexts/{id}/files/list": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "GET", path: "/v1/contexts/" + idA + "/files/list", key: e.KeyB}))
		},
		"GET /v1/contexts/{id}/shell": func(t *testing.T) {
			// Refused before the upgrade: B never gets a terminal in A's context.
			notFound(t, e.do(t, req{method: "GET", path: "/v1/contexts/" + idA + "/shell", key: e.KeyB,
				header: map[string]string{"Connection": "Upgrade", "Upgrade": api.ShellProtocol}}))
		},
		"GET /v1/conversations/{conversationId}/paths/{pathId}/shell": func(t *testing.T) {
			// B's conv-a is B's own context (the recorder cannot be
			// upgraded, so no terminal opens); A's stays A's (stillIntact).
			w := e.do(t, req{method: "GET", path: "/v1/conversations/conv-a/paths/main/shell", key: e.KeyB,
				header: map[string]string{"Connection": "Upgrade", "Upgrade": api.ShellProtocol}})
			if w.Code == http.StatusSwitchingProtocols || strings.Contains(w.Body.String(), idA) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		},
		"POST /v1/conversations/{conversationId}/paths/{pathId}/events": func(t *testing.T) {
			// B's "deleted" applies to B's own (conv-a, main), never A's.
			e.do(t, req{method: "POST", path: "/v1/conversations/conv-a/paths/main/events", key: e.KeyB, body: map[string]any{"type": "deleted"}})
		},
		"PUT /v1/conversations/{conversationId}/paths/{pathId}/files": func(t *testing.T) {
			e.do(t, req{method: "PUT", path: "/v1/conversations/conv-a/paths/main/files?path=a.txt", key: e.KeyB, body: "B was here"})
		},
		"GET /v1/conversations/{conversationId}/paths/{pathId}/files": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "GET", path: "/v1/conversations/conv-a/paths/side/files?path=a.txt", key: e.KeyB}))
			w := e.do(t, req{method: "GET", path: "/v1/conversations/conv-a/paths/main/files?path=a.txt", key: e.KeyB})
			if strings.Contains(w.Body.String(), "A's file") {
				t.Fatalf("B read A's file: %s", w.Body)
			}
		},
		"DELETE /v1/conversations/{conversationId}": func(t *testing.T) {
			// B ending "conv-a" ends only B's own paths of that name (B may
			// have one from another case); A's stay (stillIntact).
			w := e.do(t, req{method: "DELETE", path: "/v1/conversations/conv-a", key: e.KeyB})
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		},
		"GET /v1/secrets": func(t *testing.T) {
			w := e.do(t, req{method: "GET", path: "/v1/secrets", key: e.KeyB})
			if w.Code != 200 || strings.Contains(w.Body.String(), `"gh"`) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		},
		"PUT /v1/secrets/{name}": func(t *testing.T) {
			// B's secret of the same name is B's own.
			e.do(t, req{method: "PUT", path: "/v1/secrets/gh", key: e.KeyB, body: api.SecretRequest{Value: "b-value-1", Hosts: []string{"evil.test"}}})
			aSecretIntact(t)
		},
		"DELETE /v1/secrets/{name}": func(t *testing.T) {
			e.do(t, req{method: "DELETE", path: "/v1/secrets/gh", key: e.KeyB})
			e.do(t, req{method: "DELETE", path: "/v1/secrets/gh", key: e.KeyB})
			aSecretIntact(t)
		},
		"GET /v1/templates": func(t *testing.T) {
			w := e.do(t, req{method: "GET", path: "/v1/templates", key: e.KeyB})
			if w.Code != 200 || strings.Contains(w.Body.String(), tplA.ID) || strings.Contains(w.Body.String(), `"app"`) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		},
		"GET /v1/templates/{nameOrId}": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "GET", path: "/v1/templates/" + tplA.ID, key: e.KeyB}))
			notFound(t, e.do(t, req{method: "GET", path: "/v1/templates/app", key: e.KeyB}))
		},
		"DELETE /v1/templates/{nameOrId}": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "DELETE", path: "/v1/templates/" + tplA.ID, key: e.KeyB}))
			notFound(t, e.do(t, req{method: "DELETE", path: "/v1/templates/app", key: e.KeyB}))
			aTemplateIntact(t)
		},
		"GET /v1/templates/builds/{buildId}": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "GET", path: "/v1/templates/builds/" + buildA.BuildID, key: e.KeyB}))
			aBuildIntact(t)
		},
		"POST /v1/templates/builds": func(t *testing.T) {
			// B's build of "app" FROM "app" is B's own: A's template is
			// neither its base nor replaced.
			w := e.do(t, req{method: "POST", path: "/v1/templates/builds", key: e.KeyB, body: api.TemplateBuildRequest{Name: "app", Dockerfile: "FROM app\n"}})
			if strings.Contains(w.Body.String(), buildA.BuildID) {
				t.Fatalf("B's build answer names A's: %s", w.Body)
			}
			aTemplateIntact(t)
			aBuildIntact(t)
		},
		"POST /v1/templates": func(t *testing.T) {
			e.do(t, req{method: "POST", path: "/v1/templates", key: e.KeyB, body: api.TemplateRequest{Name: "app", Ref: "127.0.0.1:1/x:1"}})
			aTemplateIntact(t)
		},
		"GET /v1/keys": func(t *testing.T) {
			w := e.do(t, req{method: "GET", path: "/v1/keys", key: e.KeyB})
			for _, k := range aKeys {
				if w.Code != 200 || strings.Contains(w.Body.String(), k.ID) || strings.Contains(w.Body.String(), "a-second") {
					t.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		},
		"POST /v1/keys": func(t *testing.T) {
			e.do(t, req{method: "POST", path: "/v1/keys", key: e.KeyB, body: api.APIKeyRequest{Name: "b"}})
			aKeysIntact(t)
		},
		"DELETE /v1/keys/{id}": func(t *testing.T) {
			for _, k := range aKeys {
				notFound(t, e.do(t, req{method: "DELETE", path: "/v1/keys/" + k.ID, key: e.KeyB}))
			}
			aKeysIntact(t)
		},
		"GET /v1/usage": func(t *testing.T) {
			usageAsked = nil
			e.do(t, req{method: "GET", path: "/v1/usage?tenant=tenant-a", key: e.KeyB})
			if len(usageAsked) != 1 || usageAsked[0] != "tenant-b" {
				t.Fatalf("usage asked for %v, want tenant-b's only", usageAsked)
			}
		},
		"GET /v1/volumes": func(t *testing.T) {
			w := e.do(t, req{method: "GET", path: "/v1/volumes", key: e.KeyB})
			if w.Code != 200 || strings.Contains(w.Body.String(), volA.ID) || strings.Contains(w.Body.String(), "avol") {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		},
		"POST /v1/volumes": func(t *testing.T) {
			// B's volume of the same name is B's own.
			e.do(t, req{method: "POST", path: "/v1/volumes", key: e.KeyB, body: api.VolumeRequest{Name: "avol", SizeBytes: volumes.MinSizeBytes}})
			aVolumeIntact(t)
		},
		"GET /v1/volumes/{nameOrId}": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "GET", path: "/v1/volumes/" + volA.ID, key: e.KeyB}))
		},
		"DELETE /v1/volumes/{nameOrId}": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "DELETE", path: "/v1/volumes/" + volA.ID, key: e.KeyB}))
			aVolumeIntact(t)
		},
		"POST /v1/contexts/{id}/snapshots": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "POST", path: "/v1/contexts/" + idA + "/snapshots", key: e.KeyB, body: api.SnapshotRequest{Name: "stolen"}}))
		},
		"POST /v1/contexts/{id}/fork": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "POST", path: "/v1/contexts/" + idA + "/fork", key: e.KeyB, body: api.ForkRequest{PathID: "b-branch"}}))
		},
		"GET /v1/snapshots": func(t *testing.T) {
			for _, q := range []string{"", "?contextId=" + idA} {
				w := e.do(t, req{method: "GET", path: "/v1/snapshots" + q, key: e.KeyB})
				if w.Code != 200 || strings.Contains(w.Body.String(), snapA.ID) || strings.Contains(w.Body.String(), "snap-a") {
					t.Fatalf("%s: %d %s", q, w.Code, w.Body)
				}
			}
		},
		"DELETE /v1/snapshots/{id}": func(t *testing.T) {
			notFound(t, e.do(t, req{method: "DELETE", path: "/v1/snapshots/" + snapA.ID, key: e.KeyB}))
			notFound(t, e.do(t, req{method: "DELETE", path: "/v1/snapshots/snap-a", key: e.KeyB}))
			aSnapshotIntact(t)
		},
		"GET /v1/conversations/{conversationId}/paths/{pathId}/files/list": func(t *testing.T) {
			w := e.do(t, req{method: "GET", path: "/v1/conversations/conv-a/paths/main/files/list", key: e.KeyB})
			if strings.Contains(w.Body.String(), "A's file") {
				t.Fatalf("B listed A's files: %s", w.Body)
			}
		},
	}
	for _, rt := range e.Server.RouteInfos() {
		name := rt.Method + " " + rt.Path
		fn, ok := cases[name]
		if !ok {
			t.Errorf("route %s has no tenant-isolation case", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			fn(t)
			stillIntact(t)
		})
	}
}
