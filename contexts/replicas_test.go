package contexts_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// replicaProvider is one replica's handle on a shared provider (one fake
// both replicas reach, as every sandlot replica reaches every pod): it
// counts the warm sandboxes this replica made and, across replicas, the
// Destroy calls per sandbox.
type replicaProvider struct {
	*contextstest.Provider
	tally *tally
	node  string
}

type tally struct {
	mu       sync.Mutex
	pooled   map[string]int // warm sandboxes made, by node
	destroys map[string]int // Destroy calls, by sandbox
}

func (p *replicaProvider) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	sb, err := p.Provider.Create(ctx, spec)
	if err == nil && spec.Labels["sandlot.pool"] != "" {
		p.tally.mu.Lock()
		p.tally.pooled[p.node]++
		p.tally.mu.Unlock()
	}
	return sb, err
}

func (p *replicaProvider) Destroy(ctx context.Context, id string) error {
	p.tally.mu.Lock()
	p.tally.destroys[id]++
	p.tally.mu.Unlock()
	return p.Provider.Destroy(ctx, id)
}

func (t *tally) get(m map[string]int, k string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return m[k]
}

// replica is one sandlot replica: its own store connection pool on the
// shared Postgres, its own manager.
type replica struct {
	node string
	m    *contexts.Manager
}

// TestReplicasOnSharedProvider: two replicas on one real Postgres with a
// shared provider. A context made through either is served by the other
// with its state; expiry, lost records and the warm pool run on the
// holder of the cluster lease alone, and expiry destroys a sandbox once;
// when the holder is killed (no Close: its lease is not given up), the
// other keeps serving every context and takes the cleanup over once the
// lease lapses.
func TestReplicasOnSharedProvider(t *testing.T) {
	url := pgtest.SchemaURL(t)
	ctx := context.Background()
	fake := contextstest.NewProvider()
	fake.Shared = true
	tl := &tally{pooled: map[string]int{}, destroys: map[string]int{}}
	clk := newClock()
	const leaseTTL = 3 * time.Second
	start := func(node string) *replica {
		t.Helper()
		st, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		m := contexts.NewManager(st, &replicaProvider{Provider: fake, tally: tl, node: node}, contexts.Config{
			Node: node, LeaseTTL: leaseTTL, Clock: clk.Now, PoolSize: 1, CleanupInterval: time.Hour,
		})
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		return &replica{node: node, m: m}
	}
	a := start("node-a")
	b := start("node-b")
	if !a.m.HoldsLease() || b.m.HoldsLease() {
		t.Fatalf("lease: node-a holds %v, node-b holds %v; want node-a alone (it started first)", a.m.HoldsLease(), b.m.HoldsLease())
	}
	run := func(r *replica, id contexts.Identity, code string) string {
		t.Helper()
		res, err := r.m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: code}, nil)
		if err != nil {
			t.Fatalf("%s: Execute(%s, %q): %v", r.node, id.ConversationID, code, err)
		}
		return strings.TrimSpace(res.Stdout)
	}
	create := func(r *replica, conv string, ttl time.Duration) *contexts.Record {
		t.Helper()
		rec, err := r.m.GetOrCreate(ctx, ident("t1", conv, "main"), contexts.CreateOptions{TTL: ttl})
		if err != nil {
			t.Fatalf("%s: GetOrCreate(%s): %v", r.node, conv, err)
		}
		return rec
	}
	get := func(r *replica, id string) *contexts.Record {
		t.Helper()
		rec, err := r.m.Get(ctx, "t1", id)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}

	// Any replica serves any context, state kept.
	x, y := ident("t1", "x", "main"), ident("t1", "y", "main")
	run(a, x, "v = 'made-on-a'")
	run(b, y, "v = 'made-on-b'")
	attaches := fake.AttachCalls()
	for _, c := range []struct {
		r    *replica
		id   contexts.Identity
		want string
	}{{b, x, "made-on-a"}, {a, y, "made-on-b"}, {b, x, "made-on-a"}} {
		if got := run(c.r, c.id, "print(v)"); got != c.want {
			t.Fatalf("%s serving %s: print(v) = %q, want %q", c.r.node, c.id.ConversationID, got, c.want)
		}
	}
	// Each replica attaches a context made on the other once and keeps
	// it: node-b served x twice and node-a y once, so two attaches. A
	// replica that dropped the context after each call (the record names
	// the creating node) attached at every call.
	if got := fake.AttachCalls() - attaches; got != 2 {
		t.Errorf("%d attaches for 3 calls across replicas; want 2 (one per replica and context it did not make)", got)
	}
	recX, _ := a.m.Lookup(ctx, x)
	if recX == nil || recX.Node != "node-a" || recX.ExecutionCount != 3 {
		t.Fatalf("x after calls on both replicas: %+v; want node-a's record with 3 executions", recX)
	}

	// Expiry runs on the lease holder only, and destroys the sandbox once.
	z := create(b, "z", time.Minute)
	clk.Advance(2 * time.Minute)
	if res, err := b.m.Cleanup(ctx); err != nil || res.Cleaned != 0 {
		t.Fatalf("node-b (no lease) Cleanup = %+v, %v; want nothing cleaned", res, err)
	}
	if rec := get(b, z.ID); !rec.State.Active() {
		t.Fatalf("z ended by node-b without the lease: %+v", rec)
	}
	if res, err := a.m.Cleanup(ctx); err != nil || res.Cleaned != 1 {
		t.Fatalf("node-a (lease) Cleanup = %+v, %v; want z cleaned", res, err)
	}
	var wg sync.WaitGroup
	for _, r := range []*replica{a, b, a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); r.m.Cleanup(ctx) }()
	}
	wg.Wait()
	if rec := get(a, z.ID); rec.State != contexts.StateTerminated || rec.Reason != contexts.ReasonExpired {
		t.Fatalf("z after cleanup: %s/%s, want terminated/expired", rec.State, rec.Reason)
	}
	if n := tl.get(tl.destroys, z.SandboxID); n != 1 {
		t.Fatalf("z's sandbox destroyed %d times, want once", n)
	}
	// The warm pool is filled by the holder alone.
	waitFor(t, "node-a's warm pool", func() bool { return tl.get(tl.pooled, "node-a") >= 1 })
	if n := tl.get(tl.pooled, "node-b"); n != 0 {
		t.Fatalf("node-b, without the lease, made %d warm sandboxes", n)
	}

	// A context that ends when node-a is gone, and one whose sandbox is
	// lost while it is.
	v := create(a, "v", time.Minute)
	u := create(a, "u", time.Hour)
	contexts.Kill(a.m)
	fake.Vanish(u.SandboxID)

	// node-b serves every context at once, node-a's too, state kept.
	for _, c := range []struct {
		id   contexts.Identity
		want string
	}{{x, "made-on-a"}, {y, "made-on-b"}} {
		if got := run(b, c.id, "print(v)"); got != c.want {
			t.Fatalf("node-b after node-a was killed, %s: print(v) = %q, want %q", c.id.ConversationID, got, c.want)
		}
	}

	// node-b takes the lease once node-a's lapses (a bounded wait: at most
	// leaseTTL after node-a's last renewal, plus a renewal period), ends
	// the lost record, fills its pool and expires node-a's context.
	deadline := time.Now().Add(2*leaseTTL + 10*time.Second)
	for !b.m.HoldsLease() {
		if time.Now().After(deadline) {
			t.Fatal("node-b never took the cluster lease after node-a was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "u ended as lost by the new holder", func() bool {
		rec := get(b, u.ID)
		return rec.State == contexts.StateError && strings.Contains(rec.LastError, "sandbox lost")
	})
	waitFor(t, "node-b's warm pool", func() bool { return tl.get(tl.pooled, "node-b") >= 1 })
	clk.Advance(2 * time.Minute)
	if res, err := b.m.Cleanup(ctx); err != nil || res.Cleaned < 1 {
		t.Fatalf("node-b (now the holder) Cleanup = %+v, %v; want v cleaned", res, err)
	}
	if rec := get(b, v.ID); rec.State != contexts.StateTerminated || rec.Reason != contexts.ReasonExpired {
		t.Fatalf("v after node-b's cleanup: %s/%s, want terminated/expired", rec.State, rec.Reason)
	}
	if n := tl.get(tl.destroys, v.SandboxID); n != 1 {
		t.Fatalf("v's sandbox destroyed %d times, want once", n)
	}
	if got := run(b, x, "print(v)"); got != "made-on-a" {
		t.Fatalf("x after the takeover: %q", got)
	}
}

// TestReplicaReadsTheStoreBeforeReuse: with a shared provider, a replica
// holding a context reads its record again before reusing it, so what
// another replica did to it holds: a pause made through node-b is refused
// as paused by node-a (not pinged, found unresponsive and ended as lost),
// and a context node-b ended is not served by node-a, whose next call gets
// a fresh context, with no "state lost" claim.
func TestReplicaReadsTheStoreBeforeReuse(t *testing.T) {
	st, clk := memory.New(), newClock()
	p := contextstest.NewProvider()
	p.Shared = true
	a := (&env{t: t, ctx: context.Background(), p: p, store: st, clock: clk}).start(contexts.Config{Node: "node-a"})
	b := (&env{t: t, ctx: context.Background(), p: p, store: st, clock: clk}).start(contexts.Config{Node: "node-b"})
	id := ident("t1", "c", "main")
	first := a.exec(id, "v = 1")
	if got := b.exec(id, "print(v)"); strings.TrimSpace(got.Stdout) != "1" {
		t.Fatalf("node-b: print(v) = %q", got.Stdout)
	}

	if _, err := b.m.Pause(b.ctx, "t1", first.ContextID, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err := a.m.Execute(a.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "print(v)"}, nil)
	if !errors.Is(err, contexts.ErrPaused) {
		t.Fatalf("node-a on a context paused through node-b: %v, want paused", err)
	}
	if rec := a.record(first.ContextID); !rec.State.Active() || !rec.Paused() {
		t.Fatalf("record after node-a's call: %s, paused %v; want active and paused", rec.State, rec.Paused())
	}
	if _, err := b.m.Resume(b.ctx, "t1", first.ContextID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := a.exec(id, "print(v)"); strings.TrimSpace(got.Stdout) != "1" || got.ContextID != first.ContextID {
		t.Fatalf("node-a after node-b's resume: %q in %s", got.Stdout, got.ContextID)
	}

	if err := b.m.Terminate(b.ctx, "t1", first.ContextID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	res := a.exec(id, "print('fresh')")
	if res.ContextID == first.ContextID || res.StateLost {
		t.Fatalf("node-a after node-b ended the context: context %s (first %s), state lost %v; want a fresh one, nothing lost",
			res.ContextID, first.ContextID, res.StateLost)
	}
}

// leaseFailer is a store connection whose lease renewals can be made to
// fail (the holder cut off from Postgres).
type leaseFailer struct {
	contexts.Store
	fail atomic.Bool
}

func (s *leaseFailer) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if s.fail.Load() {
		return false, errors.New("connection refused")
	}
	return s.Store.AcquireLease(ctx, name, holder, ttl)
}

// TestLeaseLostStopsWorkFirst: the holder's renewals start failing on a
// real Postgres. It stops the cluster's work (HoldsLease false, a cleanup
// pass ends nothing, its warm pool destroyed) by the time the other node
// has the lease, never after: at the moment node-b holds it, node-a no
// longer does.
func TestLeaseLostStopsWorkFirst(t *testing.T) {
	url := pgtest.SchemaURL(t)
	ctx := context.Background()
	fake := contextstest.NewProvider()
	fake.Shared = true
	clk := newClock()
	const leaseTTL = 1500 * time.Millisecond
	open := func() contexts.Store {
		st, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	fa := &leaseFailer{Store: open()}
	start := func(st contexts.Store, node string) *contexts.Manager {
		m := contexts.NewManager(st, fake, contexts.Config{Node: node, LeaseTTL: leaseTTL, Clock: clk.Now, PoolSize: 1, CleanupInterval: time.Hour})
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		return m
	}
	a := start(fa, "node-a")
	b := start(open(), "node-b")
	if !a.HoldsLease() || b.HoldsLease() {
		t.Fatalf("lease: node-a %v, node-b %v; want node-a alone", a.HoldsLease(), b.HoldsLease())
	}
	waitFor(t, "node-a's warm pool", func() bool { return a.Stats().PoolSize == 1 })
	rec, err := a.GetOrCreate(ctx, ident("t1", "z", "main"), contexts.CreateOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute) // z is due; whoever holds the lease ends it

	fa.fail.Store(true)
	deadline := time.Now().Add(2*leaseTTL + 10*time.Second)
	for !b.HoldsLease() {
		if time.Now().After(deadline) {
			t.Fatal("node-b never took the lease")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a.HoldsLease() {
		t.Fatal("node-a still counts the lease its own while node-b holds it")
	}
	if res, err := a.Cleanup(ctx); res.Cleaned != 0 {
		t.Fatalf("node-a's cleanup after losing the lease = %+v, %v; want nothing ended", res, err)
	}
	waitFor(t, "node-a's warm pool destroyed", func() bool { return a.Stats().PoolSize == 0 })
	if res, err := b.Cleanup(ctx); err != nil || res.Cleaned != 1 {
		t.Fatalf("node-b's cleanup as the holder = %+v, %v; want z ended", res, err)
	}
	if r, err := b.Get(ctx, "t1", rec.ID); err != nil || r.State != contexts.StateTerminated {
		t.Fatalf("z after node-b's cleanup: %+v, %v", r, err)
	}
}
