package control_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// TestForkMemoryRoute (runsc): E2B's Sandbox.fork of count 2 restores
// the source's memory into each fork (x = 41 in the source, x + 1 is 42
// in both), and the source answers on with its x.
func TestForkMemoryRoute(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "runsc")
	s, _ := debiantest.Default(t)
	st := memory.New()
	for _, id := range tenants {
		if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("k-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	cat := templates.New(templates.Config{Store: st, Images: s, Snapshots: st})
	dir, err := os.MkdirTemp("", "sl-e2bfork-")
	if err != nil {
		t.Fatal(err)
	}
	p, err := local.New(local.Config{Runtime: "runsc", StateDir: dir, AgentPath: testenv.AgentBinary(t), Images: s, Templates: cat, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		oci.Purge(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := p.List(context.Background())
		for _, id := range ids {
			p.Destroy(context.Background(), id)
		}
		oci.Purge(dir)
	})
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{Catalog: cat}, Manager: contexts.Config{Catalog: cat}, Provider: p})
	sb := e.Create(key1, `{"templateID":"default","timeout":300}`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(id, code string) string {
		t.Helper()
		rec, err := e.M.Get(ctx, tenants[key1], id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.M.Execute(ctx, rec.Identity, contexts.ExecuteRequest{Language: "python", Code: code, Timeout: time.Minute}, nil)
		if err != nil {
			t.Fatalf("%s in %s: %v", code, id, err)
		}
		for _, r := range res.Results {
			if r.Main {
				return r.Text
			}
		}
		return ""
	}
	run(sb.SandboxID, "x = 41")
	resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/fork", strings.NewReader(`{"count":2,"timeout":300}`), "X-API-KEY", key1, "Content-Type", "application/json")
	if resp.StatusCode != 201 {
		t.Fatalf("fork: %d", resp.StatusCode)
	}
	forks := decode[[]struct {
		Sandbox *struct{ SandboxID string }
		Error   *struct{ Message string }
	}](t, resp)
	if len(forks) != 2 {
		t.Fatalf("forks: %+v", forks)
	}
	for _, f := range forks {
		if f.Sandbox == nil {
			t.Fatalf("a fork failed: %+v", f.Error)
		}
		if got := run(f.Sandbox.SandboxID, "x + 1"); got != "42" {
			t.Fatalf("x + 1 in fork %s = %q, want 42: the source's memory", f.Sandbox.SandboxID, got)
		}
	}
	if got := run(sb.SandboxID, "x"); got != "41" {
		t.Fatalf("the source after the fork: x = %q", got)
	}
}
