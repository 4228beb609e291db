package templates_test

import (
	"archive/tar"
	"context"
	"io"
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

// TestForkTemplateSwept: a fork's template survives neither a restart nor
// another node's end of its last context. A manager on a real store
// (SQLite, Postgres) forks, restarts (its marks in memory gone), and its
// cleanup pass keeps the template while the fork runs on it and deletes it once the
// fork has ended. A snapshot the tenant took itself, named like a fork's
// (fork-…), is never swept: a name-based sweep deleted it. A fork batch
// still starting on one node (its caller's request live, no context on
// the template yet) holds the template against another node's sweep: with
// the grace alone that node deleted it.
func TestForkTemplateSwept(t *testing.T) {
	testenv.RequireRoot(t)
	templatestest.OnRealStores(t, testForkTemplateSwept)
}

func testForkTemplateSwept(t *testing.T, st store.Backend, dir string) {
	ctx := context.Background()
	imgs := templatestest.AppTenant(t, st, dir, "A")
	catalog := func() *templates.Catalog {
		return templates.New(templates.Config{Store: st, Images: imgs, Snapshots: st})
	}
	c1 := catalog()
	p := contextstest.NewProvider()
	manager := func(t *testing.T, node string, c *templates.Catalog) *contexts.Manager {
		t.Helper()
		m := contexts.NewManager(st, p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: c,
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
	cleanup := func(t *testing.T, m *contexts.Manager) {
		t.Helper()
		if _, err := m.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
	}

	m1 := manager(t, "n1", c1)
	src, err := m1.GetOrCreate(ctx, contexts.Identity{TenantID: "A", ConversationID: "c", PathID: "main"}, contexts.CreateOptions{Template: "app"})
	if err != nil {
		t.Fatal(err)
	}
	fork, err := m1.Fork(ctx, "A", src.ID, "branch")
	if err != nil {
		t.Fatal(err)
	}
	// The tenant's own snapshot, named as a fork's would be.
	own, _, err := c1.Snapshot(ctx, "A", templates.SnapshotSpec{ContextID: src.ID, Template: src.Template, Name: "fork-lookalike0000"},
		func(ctx context.Context, w io.Writer, max int64) error { return tar.NewWriter(w).Close() })
	if err != nil {
		t.Fatal(err)
	}
	if err := m1.Close(ctx); err != nil { // the restart: the marks in memory are gone
		t.Fatal(err)
	}

	m2 := manager(t, "n1", catalog())
	cleanup(t, m2)
	if !exists(fork.Snapshot.ID) {
		t.Fatal("the sweep deleted a fork's template while the fork runs on it")
	}
	if err := m2.Terminate(ctx, "A", fork.Context.ID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	cleanup(t, m2)
	if exists(fork.Snapshot.ID) {
		t.Fatal("the fork's template stayed after a restart and its last context's end")
	}
	if !exists(own.ID) {
		t.Fatal("the sweep deleted the tenant's own snapshot named fork-…")
	}

	// Node n1 starts a batch of forks; n2's sweep runs meanwhile.
	call, cancel := context.WithCancel(ctx)
	defer cancel()
	_, info, err := m2.ForkSnapshot(call, "A", src.ID)
	if err != nil {
		t.Fatal(err)
	}
	m3 := manager(t, "n2", catalog())
	cleanup(t, m3)
	if !exists(info.ID) {
		t.Fatal("another node's sweep deleted a template whose fork batch is still starting")
	}
	cancel()
	cleanup(t, m3) // n1 drops it at the request's end, or n2's sweep does
	for deadline := time.Now().Add(30 * time.Second); exists(info.ID); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the batch's template stayed after its request ended")
		}
		cleanup(t, m3)
	}
	if !exists(own.ID) {
		t.Fatal("the tenant's own snapshot named fork-… is gone")
	}
}
