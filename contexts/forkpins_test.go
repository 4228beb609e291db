package contexts_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// TestForkPinsOnly: a node keeps in memory only the pins of the forks it
// is starting, never a mark of the templates it made: the store marks
// them. Node n1 starts a fork batch (ForkSnapshot) and a context from it;
// the batch's request ends, the context ends on node n2, whose end (or
// sweep) deletes the template. n1 must then hold nothing of it: a node
// that remembered each template it made kept an entry for every template
// another node deleted, for as long as it ran.
func TestForkPinsOnly(t *testing.T) {
	testenv.RequireRoot(t)
	templatestest.OnRealStores(t, testForkPinsOnly)
}

func testForkPinsOnly(t *testing.T, st store.Backend, dir string) {
	ctx := context.Background()
	imgs := templatestest.AppTenant(t, st, dir, "A")
	catalog := templates.New(templates.Config{Store: st, Images: imgs, Snapshots: st})
	p := contextstest.NewProvider()
	manager := func(node string) *contexts.Manager {
		m := contexts.NewManager(st, p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: catalog,
			Node: node, ForkGrace: time.Nanosecond})
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(ctx) })
		return m
	}
	exists := func(id string) bool {
		t.Helper()
		ss, err := st.ListSnapshots(ctx, "A", "")
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ss, func(s templates.Snapshot) bool { return s.ID == id })
	}
	m1, m2 := manager("n1"), manager("n2")
	src, err := m1.GetOrCreate(ctx, contexts.Identity{TenantID: "A", ConversationID: "c", PathID: "main"}, contexts.CreateOptions{Template: "app"})
	if err != nil {
		t.Fatal(err)
	}
	// Fork returns once its context has started and the template's pin
	// is off: the context runs on the template, so n1 keeps it.
	res, err := m1.Fork(ctx, "A", src.ID, "branch")
	if err != nil {
		t.Fatal(err)
	}
	info := res.Snapshot
	if err := m2.Terminate(ctx, "A", res.Context.ID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); exists(info.ID); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fork's template stayed after its last context ended on n2 and n2's sweep")
		}
		if _, err := m2.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); contexts.ForkEntries(m1) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("n1 still holds %d fork templates after n2 deleted the last one", contexts.ForkEntries(m1))
		}
	}
}
