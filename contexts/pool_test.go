package contexts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

func TestPoolHitMissRefill(t *testing.T) {
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	e.p.CreateDelay = 30 * time.Millisecond // before Start: the pool worker reads it
	e.start(contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	hit := e.getOrCreate(ident("t1", "c1", "main"))
	miss := e.getOrCreate(ident("t1", "c2", "main")) // the refill is still running
	waitFor(t, "pool to refill", func() bool { return e.m.Stats().PoolSize == 1 })
	st := e.m.Stats()
	if st.PoolHits != 1 || st.PoolMisses != 1 || st.PerTemplate["default"].PoolHits != 1 {
		t.Fatalf("stats = %+v", st)
	}
	// The pooled sandbox had never run code; the labels show where it came from.
	sb, err := e.p.Attach(e.ctx, hit.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	fsb := sb.(*contextstest.Sandbox)
	if fsb.Runs() != 0 || fsb.Spec().Labels["sandlot.pool"] != "default" {
		t.Fatalf("pooled sandbox: runs %d, spec %+v", fsb.Runs(), fsb.Spec())
	}
	// It asked for python at boot (Config.PoolPrestart's default), as a
	// Spec field: user env stays the user's.
	if sp := fsb.Spec(); len(sp.Prestart) != 1 || sp.Prestart[0] != "python" || len(sp.Env) != 0 {
		t.Fatalf("pooled sandbox spec: prestart %v, env %v", sp.Prestart, sp.Env)
	}
	if s, _ := e.p.Attach(e.ctx, miss.SandboxID); s.(*contextstest.Sandbox).Spec().Labels["sandlot.context"] != miss.ID {
		t.Fatal("the missed context's sandbox was not created for it")
	}
	// Contexts with an environment never come from the pool.
	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c3", "main"), contexts.CreateOptions{Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := e.p.Attach(e.ctx, rec.SandboxID); s.(*contextstest.Sandbox).Spec().Env["A"] != "1" {
		t.Fatal("context with env got a pooled sandbox")
	}
	if st := e.m.Stats(); st.PoolHits != 1 || st.PoolSize != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestPoolDiscardsDeadSandbox(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	e.p.Kill(e.p.Running()[0])
	rec := e.getOrCreate(ident("t1", "c1", "main"))
	if rec.State != contexts.StateReady {
		t.Fatalf("record = %+v", rec)
	}
	if st := e.m.Stats(); st.PoolHits != 0 || st.PoolMisses != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestPoolOnlyForTemplatesThatWork(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1, Templates: []string{"default", "data", "bogus"}})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	e.p.CreateErr = errors.New("no such template")
	_, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{Template: "bogus"})
	wantCategory(t, err, errdefs.ErrUnavailable)
	e.p.CreateErr = nil
	before := e.p.Created()
	time.Sleep(20 * time.Millisecond)
	if got := e.p.Created(); got != before {
		t.Fatalf("a pool was started for a failing template (%d creations)", got-before)
	}
	if _, err := e.m.GetOrCreate(e.ctx, ident("t1", "c2", "main"), contexts.CreateOptions{Template: "data"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the data pool to fill", func() bool { return e.m.Stats().PerTemplate["data"].PoolSize == 1 })
	if st := e.m.Stats(); st.PoolSize != 2 || st.PerTemplate["data"].PoolMisses != 1 || st.PerTemplate["bogus"].PoolMisses != 1 {
		t.Fatalf("stats = %+v", st)
	}
}
