package contexts_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
)

// gatedPool is a fake provider whose warm-pool creations wait at a gate
// the test opens and closes; a context's own creations pass.
type gatedPool struct {
	mu     sync.Mutex
	closed chan struct{} // nil: open
	cold   int           // creations for a context (not the pool's)
	held   int           // the pool's creations waiting at the gate now
}

func (g *gatedPool) onCreate(spec contexts.Spec) {
	g.mu.Lock()
	gate := g.closed
	if spec.Labels["sandlot.pool"] == "" {
		g.cold++
	}
	g.mu.Unlock()
	if gate != nil && spec.Labels["sandlot.pool"] != "" {
		g.mu.Lock()
		g.held++
		g.mu.Unlock()
		<-gate
		g.mu.Lock()
		g.held--
		g.mu.Unlock()
	}
}

func (g *gatedPool) holding() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

func (g *gatedPool) close() {
	g.mu.Lock()
	g.closed = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedPool) open() {
	g.mu.Lock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
	g.mu.Unlock()
}

func (g *gatedPool) colds() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cold
}

// gatedEnv starts a manager over a gated fake provider with a full pool
// of size, then closes the gate: the refills that follow wait at it.
func gatedEnv(t *testing.T, size int) (*env, *gatedPool) {
	t.Helper()
	g := &gatedPool{}
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	e.p.OnCreate = g.onCreate
	e.start(contexts.Config{PoolSize: size})
	t.Cleanup(g.open) // Close waits for the refills
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == int64(size) })
	g.close()
	return e, g
}

func poolSandbox(t *testing.T, e *env, rec *contexts.Record) *contextstest.Sandbox {
	t.Helper()
	sb, err := e.p.Attach(e.ctx, rec.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	return sb.(*contextstest.Sandbox)
}

// TestPoolCreateWaitsForFill: a create that finds the pool empty while a
// warm sandbox is being made waits for that one instead of making its
// own beside it (a hit, no cold create), and is told its identity.
func TestPoolCreateWaitsForFill(t *testing.T) {
	e, g := gatedEnv(t, 1)
	contexts.SetPoolWait(e.m, time.Minute) // the gate, not the bound, decides
	first := e.getOrCreate(ident("t1", "c1", "main"))
	waitFor(t, "the refill to start", func() bool { return g.holding() == 1 })
	type result struct {
		rec *contexts.Record
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c2", "main"), contexts.CreateOptions{})
		done <- result{rec, err}
	}()
	waitFor(t, "the second create to wait for the refill", func() bool { return contexts.PoolWaiting(e.m, "default") == 1 })
	if n := g.colds(); n != 0 {
		t.Fatalf("%d cold creates while a warm sandbox was being made", n)
	}
	g.open()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting create did not return once the refill was done")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, rec := range []*contexts.Record{first, r.rec} {
		sb := poolSandbox(t, e, rec)
		if sb.Spec().Labels["sandlot.pool"] != "default" {
			t.Fatalf("context %s: not a warm sandbox: %+v", rec.ID, sb.Spec())
		}
		if v := sb.Env()[contexts.EnvConversationID]; v != rec.ConversationID {
			t.Fatalf("context %s: sandbox told conversation %q, want %q", rec.ID, v, rec.ConversationID)
		}
	}
	if st := e.m.Stats(); st.PoolHits != 2 || st.PoolMisses != 0 || g.colds() != 0 {
		t.Fatalf("stats = %+v, cold creates %d", st, g.colds())
	}
}

// TestPoolWaitIsBounded: a refill slower than the bound (twice what the
// pool's creations took) does not hold a create: it makes its own.
func TestPoolWaitIsBounded(t *testing.T) {
	e, g := gatedEnv(t, 1)
	e.getOrCreate(ident("t1", "c1", "main"))
	waitFor(t, "the refill to start", func() bool { return g.holding() == 1 })
	rec := e.getOrCreate(ident("t1", "c2", "main")) // the refill waits at the gate
	if sb := poolSandbox(t, e, rec); sb.Spec().Labels[contexts.LabelContext] != rec.ID {
		t.Fatalf("the create got %+v, not a sandbox of its own", sb.Spec())
	}
	if st := e.m.Stats(); st.PoolHits != 1 || st.PoolMisses != 1 || g.colds() != 1 {
		t.Fatalf("stats = %+v, cold creates %d", st, g.colds())
	}
}

// TestPoolTakeSkipsDeadSandbox: the identity call that claims a warm
// sandbox is its health check: a dead one is discarded and the next warm
// one serves, told the identity.
func TestPoolTakeSkipsDeadSandbox(t *testing.T) {
	e, g := gatedEnv(t, 2)
	e.p.Kill(e.p.Running()[0]) // the oldest: the first a take meets
	rec := e.getOrCreate(ident("t1", "c1", "main"))
	sb := poolSandbox(t, e, rec)
	if sb.Spec().Labels["sandlot.pool"] != "default" {
		t.Fatalf("not a warm sandbox: %+v", sb.Spec())
	}
	if v := sb.Env()[contexts.EnvTenantID]; v != "t1" {
		t.Fatalf("warm sandbox told tenant %q", v)
	}
	if st := e.m.Stats(); st.PoolHits != 1 || st.PoolMisses != 0 || g.colds() != 0 {
		t.Fatalf("stats = %+v, cold creates %d", st, g.colds())
	}
}

// TestPoolCloseWaitsForDiscards: a warm sandbox a create discards (dead
// when taken) is destroyed in the background; Close waits for that
// destroy, so no sandbox of the pool outlives it.
func TestPoolCloseWaitsForDiscards(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	dead := e.p.Running()[0]
	e.p.Kill(dead)
	e.p.DestroyDelay = 200 * time.Millisecond // the discard is still under way when Close begins
	e.getOrCreate(ident("t1", "c1", "main"))
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	if err := e.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(e.p.Running(), dead) {
		t.Fatalf("the discarded warm sandbox %s outlived Close", dead)
	}
}

// TestPoolCloseFinishesCreation: Close lets a warm sandbox being created
// finish, then destroys it, rather than cutting the runtime short mid-
// create (a runtime killed there may leave a sandbox it cannot account
// for).
func TestPoolCloseFinishesCreation(t *testing.T) {
	var mu sync.Mutex
	started := 0
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	e.p.CreateDelay = 100 * time.Millisecond
	e.p.OnCreate = func(contexts.Spec) { mu.Lock(); started++; mu.Unlock() }
	e.start(contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	rec := e.getOrCreate(ident("t1", "c1", "main")) // takes the warm one; the refill starts
	waitFor(t, "the refill to start", func() bool { mu.Lock(); defer mu.Unlock(); return started == 2 })
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	if err := e.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.p.Created(); n != 2 {
		t.Fatalf("%d sandboxes created, want 2: the refill was cut short", n)
	}
	if got, want := e.p.Running(), []string{rec.SandboxID}; !slices.Equal(got, want) {
		t.Fatalf("running after Close: %v, want the context's only %v", got, want)
	}
}
