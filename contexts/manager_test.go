package contexts_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

func TestLimits(t *testing.T) {
	e := newEnv(t, contexts.Config{MaxPerTenant: 3, MaxPerConversation: 2})
	e.getOrCreate(ident("t1", "c1", "main"))
	e.getOrCreate(ident("t1", "c1", "b1"))
	_, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "b2"), contexts.CreateOptions{})
	wantCategory(t, err, errdefs.ErrResourceExhausted)
	if want := "conversation c1 of tenant t1 has 2 active contexts (limit 2); terminate one or wait for expiry"; !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to say %q", err, want)
	}
	last := e.getOrCreate(ident("t1", "c2", "main"))
	_, err = e.m.GetOrCreate(e.ctx, ident("t1", "c3", "main"), contexts.CreateOptions{})
	wantCategory(t, err, errdefs.ErrResourceExhausted)
	if want := "tenant t1 has 3 active contexts (limit 3); terminate one or wait for expiry"; !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to say %q", err, want)
	}
	// Reuse is not limited, other tenants are not affected.
	e.getOrCreate(ident("t1", "c1", "main"))
	e.getOrCreate(ident("t2", "c1", "main"))
	// Ending one frees a slot.
	if err := e.m.Terminate(e.ctx, "t1", last.ID, ""); err != nil {
		t.Fatal(err)
	}
	e.getOrCreate(ident("t1", "c3", "main"))
	// Execute reports the limit too.
	_, err = e.m.Execute(e.ctx, ident("t1", "c4", "main"), contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
	wantCategory(t, err, errdefs.ErrResourceExhausted)
}

func TestTenantScoping(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	rec := e.getOrCreate(ident("t1", "c1", "main"))
	e.getOrCreate(ident("t2", "c1", "main"))
	if got, err := e.m.Get(e.ctx, "t1", rec.ID); err != nil || got.ID != rec.ID {
		t.Fatalf("Get own: %v, %v", got, err)
	}
	_, err := e.m.Get(e.ctx, "t2", rec.ID)
	wantCategory(t, err, errdefs.ErrNotFound)
	wantCategory(t, e.m.Terminate(e.ctx, "t2", rec.ID, contexts.ReasonManual), errdefs.ErrNotFound)
	_, err = e.m.SetTTL(e.ctx, "t2", rec.ID, time.Hour)
	wantCategory(t, err, errdefs.ErrNotFound)
	list, err := e.m.List(e.ctx, contexts.Filter{TenantID: "t2"})
	if err != nil || len(list) != 1 || list[0].TenantID != "t2" {
		t.Fatalf("List t2 = %v, %v", list, err)
	}
	if r := e.record(rec.ID); r.State != contexts.StateReady {
		t.Fatalf("another tenant ended the context: %+v", r)
	}
	_, err = e.m.Lookup(e.ctx, ident("t1", "none", "main"))
	wantCategory(t, err, errdefs.ErrNotFound)
	if got, err := e.m.Lookup(e.ctx, ident("t1", "c1", "")); err != nil || got.ID != rec.ID {
		t.Fatalf("Lookup = %v, %v", got, err)
	}
}

func TestReconcileAfterCrash(t *testing.T) {
	e1 := newEnv(t, contexts.Config{})
	a, b := ident("t1", "a", "main"), ident("t1", "b", "main")
	ra := e1.exec(a, "x = 7")
	rb := e1.exec(b, "x = 8")
	// The daemon crashes (no Close). Meanwhile b's sandbox disappears and a
	// stray sandbox is left behind.
	e1.p.Vanish(rb.SandboxID)
	stray, _ := e1.p.Create(e1.ctx, contexts.Spec{})

	e2 := e1.second(contexts.Config{})
	if e2.running(stray.ID()) {
		t.Fatal("reconcile left an unknown sandbox running")
	}
	if r := e2.record(rb.ContextID); r.State != contexts.StateError || r.LastError != "sandbox lost" {
		t.Fatalf("lost context: %+v", r)
	}
	if st := e2.m.Stats(); st.Active != 1 {
		t.Fatalf("stats after reconcile = %+v, want the surviving context adopted", st)
	}
	res := e2.exec(a, "print(x)")
	if res.ContextID != ra.ContextID || res.SandboxID != ra.SandboxID || res.Stdout != "7\n" {
		t.Fatalf("reattached context: %+v", res)
	}
	res = e2.exec(b, "print(x)")
	if res.ContextID == rb.ContextID || res.Error == nil {
		t.Fatalf("lost context's identity: %+v, want a fresh context", res)
	}
	if st := e2.m.Stats(); st.Active != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestCloseDetachesContextsAndDestroysPool(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 2})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 2 })
	rec := e.getOrCreate(ident("t1", "c1", "main"))
	waitFor(t, "pool to refill", func() bool { return e.m.Stats().PoolSize == 2 })
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.p.Running(); !cmp.Equal(got, []string{rec.SandboxID}) {
		t.Fatalf("running after Close = %v, want only the context's sandbox %s", got, rec.SandboxID)
	}
	if r := e.record(rec.ID); r.State != contexts.StateReady {
		t.Fatalf("Close ended the context: %+v", r)
	}
	_, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{})
	wantCategory(t, err, errdefs.ErrUnavailable)
	// A new manager picks the context up again.
	e2 := e.second(contexts.Config{})
	if again := e2.getOrCreate(ident("t1", "c1", "main")); again.ID != rec.ID || again.SandboxID != rec.SandboxID {
		t.Fatalf("after restart: %+v", again)
	}
}

func TestStoreFailureIsTolerated(t *testing.T) {
	fs := &flakyStore{Store: memory.New()}
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: fs, clock: newClock()}
	e.start(contexts.Config{MaxExecutionsPerContext: 4})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")

	fs.failing.Store(true)
	res := e.exec(id, "print(x)")
	if res.ContextID != first.ContextID || res.Stdout != "1\n" {
		t.Fatalf("with the store down: %+v", res)
	}
	if got, err := e.m.Lookup(e.ctx, id); err != nil || got.ExecutionCount != 2 {
		t.Fatalf("Lookup with the store down = %+v, %v", got, err)
	}
	if got, err := e.m.Get(e.ctx, "t1", first.ContextID); err != nil || got.ID != first.ContextID {
		t.Fatalf("Get with the store down = %+v, %v", got, err)
	}
	// New contexts are created in memory.
	other := e.exec(ident("t1", "c2", "main"), "y = 2")
	if other.ContextID == "" {
		t.Fatal("no context while the store is down")
	}
	// Rotation still counts (in memory) and tears down.
	e.exec(id, "1")
	e.exec(id, "1") // 4th: rotates
	if e.running(first.SandboxID) {
		t.Fatal("rotation did not tear down with the store down")
	}
	// Expiry works from the in-memory state.
	e.clock.Advance(time.Hour)
	e.m.Cleanup(e.ctx)
	if e.running(other.SandboxID) || e.m.Stats().Active != 0 {
		t.Fatalf("expiry with the store down: running %v, stats %+v", e.p.Running(), e.m.Stats())
	}
	if fs.calls.Load() == 0 {
		t.Fatal("the store was never called while down")
	}
	fs.failing.Store(false)
	if res := e.exec(id, "print('back')"); res.Stdout != "back\n" {
		t.Fatalf("after recovery: %+v", res)
	}
}

func TestClosedManager(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	e.m.Close(e.ctx)
	_, err := e.m.Execute(e.ctx, ident("t1", "c1", "main"), contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
	wantCategory(t, err, errdefs.ErrUnavailable)
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestWithoutStart(t *testing.T) {
	p := contextstest.NewProvider()
	m := contexts.NewManager(memory.New(), p, contexts.Config{})
	defer m.Close(context.Background())
	var n atomic.Int32
	id := ident("t1", "c1", "main")
	for range 3 {
		if _, err := m.Execute(context.Background(), id, contexts.ExecuteRequest{Language: "bash", Code: "echo"}, func(agent.OutputEvent) { n.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if p.Created() != 1 || n.Load() == 0 {
		t.Fatalf("created %d, streamed %d", p.Created(), n.Load())
	}
}
