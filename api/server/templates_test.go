package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
	"github.com/sandlot/sandlot/tenant"
)

// TestTemplatesAPI drives /v1/templates with two tenants over a real
// catalog (image store, a registry started here): pull and import, list,
// get and delete per tenant; tenant B never sees, uses or deletes A's
// template, though both have one named app; a public template is seen
// by both and deleted by neither; bad input is a 4xx.
func TestTemplatesAPI(t *testing.T) {
	ctx := context.Background()
	cat, _ := templateCatalog(t, templatestest.Loopback)
	e := newEnv(t, func(c *server.Config) { c.Templates = cat; c.MaxImportBytes = 8 << 20 })
	reg := templatestest.Registry(t)
	templatestest.Push(t, reg+"/a/app:1", templatestest.Image(t, "A"))
	if _, err := cat.Pull(ctx, "", reg+"/a/app:1", templates.Spec{Name: "shared"}, nil); err != nil {
		t.Fatal(err)
	}

	decode := func(b *bytes.Buffer, v any) {
		t.Helper()
		if err := json.Unmarshal(b.Bytes(), v); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
	}
	w := e.do(t, req{method: "POST", path: "/v1/templates", key: e.KeyA,
		body: api.TemplateRequest{Name: "app", Ref: reg + "/a/app:1", Settings: api.TemplateSettings{Kernels: []string{"sh"}, Workdir: "/srv"}}})
	if w.Code != 201 {
		t.Fatalf("pull: %d %s", w.Code, w.Body)
	}
	var a api.Template
	decode(w.Body, &a)
	if a.Name != "app" || a.Public || len(a.ID) != 20 || a.Settings.Workdir != "/srv" {
		t.Fatalf("pulled %+v", a)
	}
	tarball, err := os.ReadFile(templatestest.DockerArchive(t, templatestest.Image(t, "B"), "b/app:1"))
	if err != nil {
		t.Fatal(err)
	}
	w = e.do(t, req{method: "POST", path: "/v1/templates?name=app&settings=" + url.QueryEscape(`{"env":{"X":"1"}}`), key: e.KeyB,
		body: tarball, header: map[string]string{"Content-Type": "application/x-tar"}})
	if w.Code != 201 {
		t.Fatalf("import: %d %s", w.Code, w.Body)
	}
	var b api.Template
	decode(w.Body, &b)
	if b.ID == a.ID || b.Settings.Env["X"] != "1" || b.Source != "import" {
		t.Fatalf("imported %+v", b)
	}

	names := func(key string) string {
		w := e.do(t, req{method: "GET", path: "/v1/templates", key: key})
		var l api.TemplateList
		decode(w.Body, &l)
		var out []string
		for _, tp := range l.Templates {
			out = append(out, tp.ID)
		}
		return strings.Join(out, " ")
	}
	if got := names(e.KeyA); strings.Contains(got, b.ID) || !strings.Contains(got, a.ID) || !strings.HasPrefix(got, "default ") {
		t.Errorf("A lists %q (A's %s, B's %s)", got, a.ID, b.ID)
	}
	if got := names(e.KeyB); strings.Contains(got, a.ID) || !strings.Contains(got, b.ID) {
		t.Errorf("B lists %q", got)
	}
	for _, tc := range []struct {
		name   string
		r      req
		status int
	}{
		{"A gets its app", req{method: "GET", path: "/v1/templates/app", key: e.KeyA}, 200},
		{"B gets A's id", req{method: "GET", path: "/v1/templates/" + a.ID, key: e.KeyB}, 404},
		{"B deletes A's id", req{method: "DELETE", path: "/v1/templates/" + a.ID, key: e.KeyB}, 404},
		{"B deletes the public one", req{method: "DELETE", path: "/v1/templates/shared", key: e.KeyB}, 403},
		{"B deletes a built-in", req{method: "DELETE", path: "/v1/templates/default", key: e.KeyB}, 412},
		{"B gets the public one", req{method: "GET", path: "/v1/templates/shared", key: e.KeyB}, 200},
		{"unknown", req{method: "GET", path: "/v1/templates/nope", key: e.KeyA}, 404},
		{"no key", req{method: "GET", path: "/v1/templates"}, 401},
		{"malformed JSON", req{method: "POST", path: "/v1/templates", key: e.KeyA, body: `{"name": `}, 400},
		{"unknown field", req{method: "POST", path: "/v1/templates", key: e.KeyA, body: `{"name":"x","ref":"r/x:1","evil":1}`}, 400},
		{"no ref", req{method: "POST", path: "/v1/templates", key: e.KeyA, body: `{"name":"x"}`}, 400},
		{"taken name", req{method: "POST", path: "/v1/templates", key: e.KeyA, body: api.TemplateRequest{Name: "app", Ref: reg + "/a/app:1"}}, 409},
		{"bad name", req{method: "POST", path: "/v1/templates", key: e.KeyA, body: api.TemplateRequest{Name: "../x", Ref: reg + "/a/app:1"}}, 400},
		{"bad kernel", req{method: "POST", path: "/v1/templates", key: e.KeyA, body: api.TemplateRequest{Name: "x", Ref: reg + "/a/app:1", Settings: api.TemplateSettings{Kernels: []string{"cobol"}}}}, 400},
		{"unknown image", req{method: "POST", path: "/v1/templates", key: e.KeyA, body: api.TemplateRequest{Name: "x", Ref: reg + "/none:1"}}, 404},
		{"bad content type", req{method: "POST", path: "/v1/templates", key: e.KeyA, body: "x", header: map[string]string{"Content-Type": "text/plain"}}, 400},
		{"not a tarball", req{method: "POST", path: "/v1/templates?name=x", key: e.KeyA, body: "just some text, not a tar", header: map[string]string{"Content-Type": "application/x-tar"}}, 400},
		{"malformed settings", req{method: "POST", path: "/v1/templates?name=x&settings=%7B", key: e.KeyA, body: tarball, header: map[string]string{"Content-Type": "application/x-tar"}}, 400},
		{"oversized tarball", req{method: "POST", path: "/v1/templates?name=x", key: e.KeyA, body: bytes.Repeat([]byte{0}, 9<<20), header: map[string]string{"Content-Type": "application/x-tar"}}, 413},
		{"compressed body", req{method: "POST", path: "/v1/templates?name=x", key: e.KeyA, body: tarball, header: map[string]string{"Content-Type": "application/x-tar", "Content-Encoding": "gzip"}}, 415},
		{"path escape in a layer", req{method: "POST", path: "/v1/templates?name=evil", key: e.KeyA, body: evilArchive(t), header: map[string]string{"Content-Type": "application/x-tar"}}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.do(t, tc.r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if w.Code >= 400 && !strings.Contains(w.Body.String(), `"code"`) {
				t.Errorf("error body %s", w.Body)
			}
		})
	}
	if _, err := cat.Resolve(ctx, "tenant-a", "evil"); err == nil {
		t.Error("a refused import left a record")
	}
	if w := e.do(t, req{method: "DELETE", path: "/v1/templates/app", key: e.KeyB}); w.Code != 204 {
		t.Fatalf("B deletes its app: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, req{method: "GET", path: "/v1/templates/app", key: e.KeyA}); w.Code != 200 || !strings.Contains(w.Body.String(), a.ID) {
		t.Fatalf("A's app after B deleted its own: %d %s", w.Code, w.Body)
	}
}

// evilArchive is a docker archive whose layer climbs out with "..".
func evilArchive(t *testing.T) []byte {
	img := imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "../../../tmp/sandlot-escape", Body: "x"}))
	b, err := os.ReadFile(templatestest.DockerArchive(t, img, "evil/app:1"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// templateCatalog is a template catalog and the fresh image store under
// it, over a memory store holding tenant-a and tenant-b (keys e2b_<id>),
// whose tenants' pulls may reach allow besides the internet.
func templateCatalog(t *testing.T, allow []netip.Prefix) (*templates.Catalog, *image.Store) {
	t.Helper()
	testenv.RequireRoot(t)
	imgs, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	for _, id := range []string{"tenant-a", "tenant-b"} {
		st.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("e2b_"+id))
	}
	return templates.New(templates.Config{Store: st, Images: imgs, PullAllow: allow}), imgs
}
