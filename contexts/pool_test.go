package contexts_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store/memory"
)

func TestPoolHitMissRefill(t *testing.T) {
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	e.p.CreateDelay = 30 * time.Millisecond // before Start: the pool worker reads it
	e.start(contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	// A create that finds the pool empty waits for the refill under way
	// (TestPoolCreateWaitsForFill), up to a bound: here none.
	contexts.SetPoolWait(e.m, time.Nanosecond)
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

// TestPoolWaiterGivesUpNoSurplus: a create that waits for the refill
// under way and gives up makes its own sandbox; the one the pool started
// for it is surplus and does not hold the pool over its size.
func TestPoolWaiterGivesUpNoSurplus(t *testing.T) {
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	var begun atomic.Int64
	started := make(chan struct{}, 16)
	e.p.OnCreate = func(contexts.Spec) { begun.Add(1); started <- struct{}{} }
	e.p.CreateDelay = 300 * time.Millisecond // before Start: the pool worker reads it
	e.start(contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	<-started
	contexts.SetPoolWait(e.m, 100*time.Millisecond) // past the worker's answer, short of a fill
	e.getOrCreate(ident("t1", "c1", "main"))        // a hit
	<-started                                       // the refill is under way: the next create waits
	e.getOrCreate(ident("t1", "c2", "main"))        // waits, gives up, makes its own
	waitFor(t, "every creation to end", func() bool { return int64(e.p.Created()) == begun.Load() })
	if st := e.m.Stats(); st.PoolHits != 1 || st.PoolMisses != 1 {
		t.Fatalf("stats = %+v, want one hit and one miss (the create that gave up)", st)
	}
	waitFor(t, "two contexts and a pool of one", func() bool {
		return len(e.p.Running()) == 3 && e.m.Stats().PoolSize == 1
	})
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

// TestPoolSpec: a template's pool spec gives its warm sandboxes a network,
// an environment and a warm-up; only a create asking for the same network
// and environment takes one, and a sandbox whose warm-up fails is never
// offered.
func TestPoolSpec(t *testing.T) {
	net := &policy.Policy{Ingress: policy.Ingress{Public: true}}
	env := map[string]string{"DISPLAY": ":0"}
	var mu sync.Mutex
	warmed, fail, notFill := 0, true, 0
	spec := contexts.PoolSpec{Size: 1, Network: net, Env: env, Warm: func(ctx context.Context, sb contexts.Sandbox) error {
		mu.Lock()
		defer mu.Unlock()
		if !contexts.PoolFill(ctx) {
			notFill++
		}
		if fail { // the first warm-up fails: that sandbox is destroyed
			fail = false
			return errors.New("no X server")
		}
		warmed++
		return nil
	}}
	nets := &claimNets{}
	e := newEnv(t, contexts.Config{PoolSpecs: map[string]contexts.PoolSpec{"default": spec}, Networks: nets})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	if n := len(e.p.Running()); n != 1 {
		t.Fatalf("running sandboxes = %d, want 1 (the failed warm-up's destroyed)", n)
	}
	for _, tc := range []struct {
		name string
		opts contexts.CreateOptions
	}{
		{"no network", contexts.CreateOptions{Env: env}},
		{"other network", contexts.CreateOptions{Env: env, Network: &policy.Policy{}}},
		{"other env", contexts.CreateOptions{Env: map[string]string{"DISPLAY": ":1"}, Network: net}},
		{"no env", contexts.CreateOptions{Network: net}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.m.GetOrCreate(e.ctx, ident("t1", tc.name, "main"), tc.opts); err != nil {
				t.Fatal(err)
			}
			if st := e.m.Stats(); st.PoolHits != 0 {
				t.Fatalf("a create with %+v took the warm sandbox", tc.opts)
			}
		})
	}
	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "same", "main"), contexts.CreateOptions{Env: map[string]string{"DISPLAY": ":0"}, Network: &policy.Policy{Ingress: policy.Ingress{Public: true}}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := e.p.Attach(e.ctx, rec.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	sp := sb.(*contextstest.Sandbox).Spec()
	if st := e.m.Stats(); st.PoolHits != 1 || sp.Labels["sandlot.pool"] != "default" || sp.Env["DISPLAY"] != ":0" || sp.Network == nil || !sp.Network.Ingress.Public {
		t.Fatalf("stats %+v, sandbox spec %+v", st, sp)
	}
	// The warm sandbox's network, set up without an owner, is claimed for
	// the create's tenant and context (the ports route finds it by the
	// context's id).
	if want := []string{rec.SandboxID + " t1 " + rec.ID}; !slices.Equal(nets.claimed(), want) {
		t.Errorf("claims = %q, want %q", nets.claimed(), want)
	}
	mu.Lock()
	defer mu.Unlock()
	if warmed < 1 {
		t.Fatalf("warmed = %d", warmed)
	}
	if notFill != 0 {
		t.Errorf("%d of the pool's warm-ups were not told they are a pool's fill (PoolFill)", notFill)
	}
}

// TestPoolSpecWarmsACreate: a create the pool could serve but finds empty
// (no pool, or none ready) gets a new sandbox warmed before the create
// returns, so it returns what a warm sandbox would have been; a create
// asking for another network or environment is not warmed; a warm-up
// that fails fails the create and leaves no sandbox running.
func TestPoolSpecWarmsACreate(t *testing.T) {
	env := map[string]string{"DISPLAY": ":0"}
	var mu sync.Mutex
	warmed := map[string]bool{}
	var failWarm bool
	spec := contexts.PoolSpec{Size: 0, Env: env, Warm: func(ctx context.Context, sb contexts.Sandbox) error {
		mu.Lock()
		defer mu.Unlock()
		if failWarm {
			return errors.New("the X server did not start")
		}
		if contexts.PoolFill(ctx) {
			return errors.New("a create's warm-up was told it is a pool's fill")
		}
		warmed[sb.ID()] = true
		return nil
	}}
	e := newEnv(t, contexts.Config{PoolSpecs: map[string]contexts.PoolSpec{"default": spec}})
	isWarm := func(id string) bool { mu.Lock(); defer mu.Unlock(); return warmed[id] }

	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "same", "main"), contexts.CreateOptions{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if !isWarm(rec.SandboxID) {
		t.Errorf("a create the pool could serve returned sandbox %s unwarmed", rec.SandboxID)
	}
	other, err := e.m.GetOrCreate(e.ctx, ident("t1", "other", "main"), contexts.CreateOptions{Env: map[string]string{"DISPLAY": ":1"}})
	if err != nil {
		t.Fatal(err)
	}
	if isWarm(other.SandboxID) {
		t.Errorf("a create with another environment was warmed")
	}

	mu.Lock()
	failWarm = true
	mu.Unlock()
	before := len(e.p.Running())
	_, err = e.m.GetOrCreate(e.ctx, ident("t1", "fails", "main"), contexts.CreateOptions{Env: env})
	wantCategory(t, err, errdefs.ErrUnavailable)
	if n := len(e.p.Running()); n != before {
		t.Errorf("running sandboxes after a failed warm-up: %d, want %d", n, before)
	}
	if _, err := e.m.Lookup(e.ctx, ident("t1", "fails", "main")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the failed create left an active context: %v", err)
	}
}

// claimNets is a contexts.Networks that records claims of warm networks.
type claimNets struct {
	mu     sync.Mutex
	claims []string
}

func (n *claimNets) Check(string, policy.Policy) error { return nil }
func (n *claimNets) Update(context.Context, string, string, policy.Policy) (*policy.Effective, error) {
	return &policy.Effective{}, nil
}

func (n *claimNets) Claim(_ context.Context, sandboxID, tenant, contextID string, _ policy.Policy) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.claims = append(n.claims, sandboxID+" "+tenant+" "+contextID)
	return nil
}

func (n *claimNets) claimed() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.claims)
}

// TestSandboxKnowsItsIdentity: every context's sandbox has TENANT_ID,
// CONVERSATION_ID and PATH_ID in its environment (001 §5.2): one created
// for the context at create, under the caller's own variables; one from
// the warm pool, made before anyone owned it, when the context claims it.
func TestSandboxKnowsItsIdentity(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	env := func(rec *contexts.Record) map[string]string {
		t.Helper()
		sb, err := e.p.Attach(e.ctx, rec.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		return sb.(*contextstest.Sandbox).Env()
	}
	pooled := e.getOrCreate(ident("t1", "c1", "b1"))
	if st := e.m.Stats(); st.PoolHits != 1 {
		t.Fatalf("not served from the pool: %+v", st)
	}
	want := map[string]string{"TENANT_ID": "t1", "CONVERSATION_ID": "c1", "PATH_ID": "b1"}
	if diff := cmp.Diff(want, env(pooled)); diff != "" {
		t.Fatalf("a pooled sandbox's environment (-want +got):\n%s", diff)
	}
	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c2", "main"), contexts.CreateOptions{Env: map[string]string{"A": "1", "TENANT_ID": "mine"}})
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"TENANT_ID": "mine", "CONVERSATION_ID": "c2", "PATH_ID": "main", "A": "1"}
	if diff := cmp.Diff(want, env(rec)); diff != "" {
		t.Fatalf("a created sandbox's environment (-want +got):\n%s", diff)
	}
}

// TestPoolWaitsForTemplate: while the template is being built (a create
// fails with errdefs.Retry), the pool says so at INFO and tries again when
// told, not as a warning with its own backoff; it fills once the template
// is there.
func TestPoolWaitsForTemplate(t *testing.T) {
	var mu sync.Mutex
	var logs bytes.Buffer
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	e.p.CreateErr = errdefs.Retry(fmt.Errorf("the default template is being built: %w", errdefs.ErrUnavailable), 20*time.Millisecond)
	e.start(contexts.Config{PoolSize: 1, Logger: slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))})
	read := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	waitFor(t, "the pool to wait", func() bool { return strings.Count(read(), "warm pool: waiting for the template") >= 2 })
	if out := read(); strings.Contains(out, `"level":"WARN"`) || !strings.Contains(out, `"retry_in":20000000`) {
		t.Errorf("the pool's lines while the template builds:\n%s", out)
	}
	e.p.CreateErr = nil
	waitFor(t, "the pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRefreshPool: after RefreshPool (a built-in template's image changed)
// no create gets a warm sandbox made before: the ready ones are destroyed,
// one being created at the time is destroyed when it is done, and the pool
// refills with new ones. Before, the default's full image went live while
// the pool still handed out two sandboxes of its core (no numpy in them).
func TestRefreshPool(t *testing.T) {
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	started := make(chan struct{}, 16)
	e.p.OnCreate = func(contexts.Spec) { started <- struct{}{} }
	e.p.CreateDelay = 300 * time.Millisecond
	e.start(contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	<-started
	old := e.p.Running()
	if len(old) != 1 {
		t.Fatalf("running %v", old)
	}
	e.m.RefreshPool("default")
	waitFor(t, "the old warm sandbox to go", func() bool { return !slices.Contains(e.p.Running(), old[0]) })
	select {
	case <-started: // the refill's create is under way
	case <-time.After(time.Minute):
		t.Fatal("the pool did not refill after RefreshPool")
	}
	e.m.RefreshPool("default") // that sandbox will be of the image before
	waitFor(t, "the pool to refill", func() bool { return e.m.Stats().PoolSize == 1 })
	if d := e.p.Destroyed(); d != 2 {
		t.Errorf("%d sandboxes destroyed, want 2: the ready one and the one being created at the second refresh", d)
	}
	e.p.CreateDelay = 0
	rec := e.getOrCreate(ident("t1", "c1", "main"))
	running := e.p.Running()
	if slices.Contains(old, rec.SandboxID) || !slices.Contains(running, rec.SandboxID) {
		t.Fatalf("a create after RefreshPool got %s (running %v, before %v)", rec.SandboxID, running, old)
	}
	if st := e.m.Stats(); st.PoolHits != 1 {
		t.Errorf("the create did not take the refilled warm sandbox: %+v", st)
	}
	e.m.RefreshPool("no-such-template") // no pool: nothing happens
}

// TestPoolGrowsWithDemand: a burst of creates grows the pool past its
// size to the recent demand (a second's worth), within the memory budget,
// so the next burst is served from it; once acquisitions stop for a while
// the pool trims back to its size.
func TestPoolGrowsWithDemand(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int64
		grown  int64
	}{
		{"within the budget", 0, 9},        // 10 at once: 9 a second
		{"the budget caps it", 5 << 24, 5}, // 5 sandboxes of 16 MiB
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
			e.start(contexts.Config{PoolSize: 2, PoolMemoryBudget: tc.budget, MaxPerTenant: -1, MaxPerConversation: -1})
			wait := func(what string, cond func() bool) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for !cond() {
					if time.Now().After(deadline) {
						t.Fatalf("timed out waiting for %s (stats %+v)", what, e.m.Stats())
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			wait("the pool to fill", func() bool { return e.m.Stats().PoolSize == 2 })
			for i := range 10 { // the clock stands still: all at once
				e.getOrCreate(ident("t1", fmt.Sprintf("a%d", i), "main"))
			}
			wait("the pool to grow", func() bool { return e.m.Stats().PoolSize >= tc.grown })
			// Settled (no size change for 300 ms): a budget that did not
			// hold would show here, before a burst takes from the pool.
			last, since := e.m.Stats().PoolSize, time.Now()
			wait("the pool to settle", func() bool {
				if n := e.m.Stats().PoolSize; n != last {
					last, since = n, time.Now()
				}
				return time.Since(since) > 300*time.Millisecond
			})
			if tc.budget > 0 && last != tc.grown {
				t.Fatalf("pool of %d, want %d: the budget of 5 sandboxes", last, tc.grown)
			}
			hits := e.m.Stats().PoolHits
			for i := range tc.grown {
				e.getOrCreate(ident("t1", fmt.Sprintf("b%d", i), "main"))
			}
			if got := e.m.Stats().PoolHits - hits; got != tc.grown {
				t.Fatalf("a burst of %d after the pool grew: %d served from it", tc.grown, got)
			}
			// Idle past poolIdle: a kick (a create the pool cannot serve)
			// trims it to its size.
			e.clock.Advance(31 * time.Second)
			if _, err := e.m.GetOrCreate(e.ctx, ident("t1", "env", "main"), contexts.CreateOptions{Env: map[string]string{"A": "1"}}); err != nil {
				t.Fatal(err)
			}
			wait("the pool to trim to its size", func() bool { return e.m.Stats().PoolSize == 2 })
		})
	}
}
