package daemon

import (
	"context"
	"log/slog"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
)

// Deleting a tenant ends its contexts (reason deleted, sandbox destroyed)
// and nobody else's. Before, they lived on until they expired.
func TestTenantReaper(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	prov := contextstest.NewProvider()
	m := contexts.NewManager(st, prov, contexts.Config{PoolSize: -1})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	a, b := &tenant.Tenant{Name: "a"}, &tenant.Tenant{Name: "b"}
	for _, tn := range []*tenant.Tenant{a, b} {
		if err := st.CreateTenant(ctx, tn, ""); err != nil {
			t.Fatal(err)
		}
	}
	create := func(tid, conv string) *contexts.Record {
		rec, err := m.GetOrCreate(ctx, contexts.Identity{TenantID: tid, ConversationID: conv}, contexts.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	r := &tenantReaper{st: st, m: m, log: slog.New(slog.DiscardHandler)}
	a1, b1 := create(a.ID, "c1"), create(b.ID, "c1")
	if n := r.pass(ctx, false); n != 0 {
		t.Fatalf("first pass ended %d contexts of live tenants", n)
	}
	a2 := create(a.ID, "c2") // after the reaper has seen a
	if err := st.DeleteTenant(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if n := r.pass(ctx, false); n != 2 {
		t.Fatalf("pass after deleting a ended %d contexts, want 2", n)
	}
	for _, rec := range []*contexts.Record{a1, a2} {
		got, err := m.Get(ctx, a.ID, rec.ID)
		if err != nil || got.State != contexts.StateTerminated || got.Reason != contexts.ReasonDeleted {
			t.Fatalf("context of the deleted tenant: %+v %v", got, err)
		}
	}
	if got, _ := m.Get(ctx, b.ID, b1.ID); got == nil || !got.State.Active() {
		t.Fatalf("the other tenant's context: %+v", got)
	}
	if running := prov.Running(); len(running) != 1 || running[0] != b1.SandboxID {
		t.Fatalf("running sandboxes %v, want only %s", running, b1.SandboxID)
	}
	// A daemon that starts after the deletion finds the leftovers.
	create(b.ID, "c2")
	if err := st.DeleteTenant(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	fresh := &tenantReaper{st: st, m: m, log: slog.New(slog.DiscardHandler)}
	if n := fresh.pass(ctx, false); n != 2 {
		t.Fatalf("first pass of a new reaper ended %d contexts, want 2", n)
	}
}
