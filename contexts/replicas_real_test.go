package contexts_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// sharedLocal is the local provider standing for a shared one: both
// managers of the test run in one process over one state dir, so both
// reach every sandbox by id, as replicas reach pods.
type sharedLocal struct{ *local.Provider }

func (p sharedLocal) Capabilities() contexts.Capabilities {
	return p.Provider.Capabilities() | contexts.CapShared
}

// TestRealReplicasSharedLocal: TestReplicasOnSharedProvider's story on
// real sandboxes (the local runtime, python kernels) and a real Postgres:
// a kernel's state made through one replica is read and changed through
// the other; the holder of the cluster lease is killed (no Close) and the
// other keeps serving, takes the lease, and its sweep removes the dead
// holder's warm sandbox while keeping the context's.
func TestRealReplicasSharedLocal(t *testing.T) {
	testenv.RequireOCIRuntime(t)
	url := pgtest.SchemaURL(t)
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "slr-") // short: socket paths are bounded
	if err != nil {
		t.Fatal(err)
	}
	lp, err := local.New(local.Config{StateDir: dir, AgentPath: testenv.AgentBinary(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := lp.List(context.Background())
		for _, id := range ids {
			lp.Destroy(context.Background(), id)
		}
		os.RemoveAll(dir)
	})
	const leaseTTL = 2 * time.Second
	start := func(node string) *realDaemon {
		t.Helper()
		st, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		m := contexts.NewManager(st, sharedLocal{lp}, contexts.Config{Node: node, LeaseTTL: leaseTTL, PoolSize: 1, CleanupInterval: time.Hour})
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()); st.Close() })
		return &realDaemon{t: t, ctx: ctx, node: node, url: url, dir: dir, store: st, m: m}
	}
	a := start("node-a")
	b := start("node-b")
	if !a.m.HoldsLease() || b.m.HoldsLease() {
		t.Fatalf("lease: node-a %v, node-b %v; want node-a alone", a.m.HoldsLease(), b.m.HoldsLease())
	}
	c1 := ident("t1", "c1", "main")
	r1 := a.mustExec(c1, "x = 41")
	check := func(d *realDaemon, code, want string) {
		t.Helper()
		res := d.mustExec(c1, code)
		if mainResult(res) != want || res.ContextID != r1.ContextID || res.SandboxID != r1.SandboxID {
			t.Fatalf("%s: %s = %q in %s/%s, want %q in %s/%s (error %+v)", d.node, code, mainResult(res),
				res.ContextID, res.SandboxID, want, r1.ContextID, r1.SandboxID, res.Error)
		}
	}
	check(b, "x += 1; x", "42")
	check(a, "x", "42")

	// node-a's pool refills after c1's create took its warm sandbox; it
	// and c1's are all that run (node-b, without the lease, has no pool).
	waitPool := func(d *realDaemon) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); d.m.Stats().PoolSize != 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: warm pool %d, want 1", d.node, d.m.Stats().PoolSize)
			}
		}
	}
	waitPool(a)
	before, err := lp.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 2 || !slices.Contains(before, r1.SandboxID) {
		t.Fatalf("running before the kill: %v, want c1's %s and node-a's warm sandbox", before, r1.SandboxID)
	}

	contexts.Kill(a.m)
	check(b, "x", "42")
	for deadline := time.Now().Add(2*leaseTTL + 30*time.Second); !b.m.HoldsLease(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("node-b never took the cluster lease after node-a was killed")
		}
	}
	waitPool(b)
	for range 2 { // the sweep's grace is one pass
		if _, err := b.m.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, err := lp.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || !slices.Contains(after, r1.SandboxID) {
		t.Fatalf("running after node-b's sweep: %v, want c1's %s and node-b's warm sandbox (node-a's swept)", after, r1.SandboxID)
	}
	for _, id := range before {
		if id != r1.SandboxID && slices.Contains(after, id) {
			t.Fatalf("node-a's warm sandbox %s survived node-b's sweep", id)
		}
	}
	check(b, "x", "42")
}
