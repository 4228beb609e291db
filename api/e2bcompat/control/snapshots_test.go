package control_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
	"github.com/sandlot/sandlot/tenant"
)

// TestSnapshotRoutes: createSnapshot makes a template of the caller's from
// a sandbox of a built template; GET /snapshots lists it (by sandbox,
// by name), another tenant neither lists, starts from nor deletes it;
// a create from its id starts; deleteSnapshot (DELETE /templates/{id})
// removes it from the list.
func TestSnapshotRoutes(t *testing.T) {
	testenv.RequireRoot(t) // layer.Apply keeps owners
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	for _, id := range tenants {
		if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("k-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	cat := templates.New(templates.Config{Store: st, Images: s, Snapshots: st})
	archive := templatestest.DockerArchive(t, templatestest.Image(t, "app"), "example.test/app:v1")
	if _, err := cat.Import(context.Background(), tenants[key1], archive, templates.Spec{Name: "app"}, nil); err != nil {
		t.Fatal(err)
	}
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{Catalog: cat}, Manager: contexts.Config{Catalog: cat}})
	sb := e.Create(key1, `{"templateID":"app"}`)
	resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/snapshots", strings.NewReader(`{"name":"snap1"}`), "X-API-KEY", key1)
	if resp.StatusCode != 201 {
		t.Fatalf("createSnapshot: %d", resp.StatusCode)
	}
	info := decode[struct {
		SnapshotID string
		Names      []string
	}](t, resp)
	if info.SnapshotID == "" || len(info.Names) != 1 || info.Names[0] != "snap1" {
		t.Fatalf("snapshot info %+v", info)
	}
	type item struct{ SnapshotID string }
	list := func(key, query string) []item {
		t.Helper()
		return decode[[]item](t, e.Do("GET", "/snapshots"+query, nil, "X-API-KEY", key))
	}
	for _, tc := range []struct {
		key, query string
		want       int
	}{
		{key1, "", 1},
		{key1, "?sandboxID=" + sb.SandboxID, 1},
		{key1, "?sandboxID=other", 0},
		{key1, "?name=snap1", 1},
		{key1, "?name=nope", 0},
		{key2, "", 0},
	} {
		if got := list(tc.key, tc.query); len(got) != tc.want {
			t.Errorf("GET /snapshots%s as %s: %v, want %d", tc.query, tc.key[:6], got, tc.want)
		}
	}
	if r := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/snapshots", strings.NewReader(`{"name":"snap1"}`), "X-API-KEY", key1); r.StatusCode != 409 {
		t.Errorf("a second snapshot named snap1: %d, want 409", r.StatusCode)
	}
	if r := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/snapshots", strings.NewReader(`{"name":"../x"}`), "X-API-KEY", key1); r.StatusCode != 400 {
		t.Errorf("a bad name: %d, want 400", r.StatusCode)
	}
	if r := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/snapshots", strings.NewReader(`{}`), "X-API-KEY", key2); r.StatusCode != 404 {
		t.Errorf("another tenant's snapshot of the sandbox: %d, want 404", r.StatusCode)
	}
	if r := e.Do("POST", "/v2/sandboxes", strings.NewReader(`{"templateID":"`+info.SnapshotID+`"}`), "X-API-KEY", key2, "Content-Type", "application/json"); r.StatusCode != 404 {
		t.Errorf("another tenant's create from the snapshot: %d, want 404", r.StatusCode)
	}
	if r := e.Do("DELETE", "/templates/"+info.SnapshotID, nil, "X-API-KEY", key2); r.StatusCode != 404 {
		t.Errorf("another tenant's delete: %d, want 404", r.StatusCode)
	}
	from := e.Create(key1, `{"templateID":"`+info.SnapshotID+`"}`)
	if from.SandboxID == "" || from.SandboxID == sb.SandboxID {
		t.Errorf("create from the snapshot: %+v", from)
	}
	// Fork: count sandboxes from one capture, each its own; bad counts
	// are 400; another tenant's fork is 404.
	resp = e.Do("POST", "/sandboxes/"+sb.SandboxID+"/fork", strings.NewReader(`{"count":2,"timeout":60}`), "X-API-KEY", key1)
	if resp.StatusCode != 201 {
		t.Fatalf("fork: %d", resp.StatusCode)
	}
	forks := decode[[]struct {
		Sandbox *struct{ SandboxID, EnvdAccessToken string }
		Error   *struct{ Code int }
	}](t, resp)
	if len(forks) != 2 || forks[0].Sandbox == nil || forks[1].Sandbox == nil || forks[0].Sandbox.SandboxID == forks[1].Sandbox.SandboxID ||
		forks[0].Sandbox.SandboxID == sb.SandboxID || forks[0].Sandbox.EnvdAccessToken == "" {
		t.Fatalf("forks %+v", forks)
	}
	for _, body := range []string{`{"count":0}`, `{"count":11}`} {
		if r := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/fork", strings.NewReader(body), "X-API-KEY", key1); r.StatusCode != 400 {
			t.Errorf("fork %s: %d, want 400", body, r.StatusCode)
		}
	}
	if r := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/fork", strings.NewReader(`{}`), "X-API-KEY", key2); r.StatusCode != 404 {
		t.Errorf("another tenant's fork: %d, want 404", r.StatusCode)
	}
	if got := list(key1, "?sandboxID="+sb.SandboxID); len(got) != 2 {
		t.Errorf("the snapshot and the fork's: %v", got)
	}
	if r := e.Do("DELETE", "/templates/"+info.SnapshotID, nil, "X-API-KEY", key1); r.StatusCode != 204 {
		t.Fatalf("deleteSnapshot: %d", r.StatusCode)
	}
	if got := list(key1, ""); len(got) != 1 {
		t.Errorf("after delete, the fork's is left: %v", got)
	}
}
