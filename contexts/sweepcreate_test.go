package contexts_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
)

// TestSweepSparesCreatesInFlight: a runtime lists a sandbox from the start
// of its create (runsc: seconds before it returns under load), so cleanup
// passes closer together than a create saw a context's or a warm pool's
// sandbox with no owner twice and destroyed it mid-create (the create
// failed: not_found). The sweep now waits, while a create begun before its
// previous pass runs, and destroys a true stray at the pass after the
// create ends.
func TestSweepSparesCreatesInFlight(t *testing.T) {
	for _, c := range []struct {
		name  string
		pool  int
		label string // the held create's spec carries it
	}{
		{"context create", -1, contexts.LabelContext},
		{"warm pool make", 1, "sandlot.pool"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, contexts.Config{PoolSize: -1})
			e.p.ListedEarly = true
			held, open := holdFirstCreate(e.p, c.label)
			before := e.p.Running()
			done := make(chan error, 1)
			if c.pool > 0 {
				e.m.Close(e.ctx)
				e.start(contexts.Config{PoolSize: c.pool})
			} else {
				go func() {
					_, err := e.m.GetOrCreate(e.ctx, ident("t1", "slow", "main"), contexts.CreateOptions{})
					done <- err
				}()
			}
			t.Cleanup(open) // before the managers' Close waits for the held create
			<-held
			var making string
			for _, id := range e.p.Running() {
				if !slices.Contains(before, id) {
					making = id
				}
			}
			stray, _ := e.p.Create(e.ctx, contexts.Spec{})
			for range 2 {
				if _, err := e.m.Cleanup(e.ctx); err != nil {
					t.Fatal(err)
				}
			}
			if making == "" || !e.running(making) {
				t.Fatalf("the sandbox being created (%q) was destroyed by two cleanup passes during its create", making)
			}
			open()
			if c.pool > 0 {
				waitFor(t, "the pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
			} else if err := <-done; err != nil {
				t.Fatalf("create: %v", err)
			}
			if _, err := e.m.Cleanup(e.ctx); err != nil {
				t.Fatal(err)
			}
			if e.running(stray.ID()) || !e.running(making) {
				t.Fatalf("the pass after the create: stray running %v (want destroyed), the create's %v (want running)",
					e.running(stray.ID()), e.running(making))
			}
		})
	}
}

// TestSweepCreateEndsMidPass: a create that spans a pass (its sandbox a
// suspect at the previous one) and ends while a sweep runs, after the
// sweep listed the owners and before it asked whether a create was under
// way, left its sandbox out of the owners while the pass counted as
// settled: the sweep destroyed the live sandbox of the context just
// created. The sweep now asks about creates before it lists the owners.
func TestSweepCreateEndsMidPass(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: -1})
	e.p.ListedEarly = true
	held, open := holdFirstCreate(e.p, contexts.LabelContext)
	before := e.p.Running()
	done := make(chan error, 1)
	go func() {
		_, err := e.m.GetOrCreate(e.ctx, ident("t1", "slow", "main"), contexts.CreateOptions{})
		done <- err
	}()
	t.Cleanup(open)
	<-held
	var making string
	for _, id := range e.p.Running() {
		if !slices.Contains(before, id) {
			making = id
		}
	}
	for range 2 {
		if _, err := e.m.Cleanup(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if making == "" || !e.running(making) {
		t.Fatalf("the sandbox being created (%q) was destroyed during its create", making)
	}
	var cerr error
	var once sync.Once
	contexts.SetSweepListed(e.m, func() {
		once.Do(func() {
			open()
			cerr = <-done // the create returned: its context owns the sandbox
		})
	})
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	contexts.SetSweepListed(e.m, nil)
	if cerr != nil {
		t.Fatalf("create: %v", cerr)
	}
	if !e.running(making) {
		t.Fatal("the pass during which the create ended destroyed the sandbox its context owns")
	}
}

// TestSweepHungCreateBounded: a create under way held every stray on the
// node alive (the sweep waited for all creates begun before its previous
// pass), so one hung create (a provider that never answers) kept any
// tenant's strays running for as long as it hung. A create older than
// CreatingTimeout no longer holds the sweep.
func TestSweepHungCreateBounded(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: -1})
	e.p.ListedEarly = true
	held, open := holdFirstCreate(e.p, contexts.LabelContext)
	done := make(chan error, 1)
	go func() {
		_, err := e.m.GetOrCreate(e.ctx, ident("t1", "hung", "main"), contexts.CreateOptions{})
		done <- err
	}()
	t.Cleanup(func() { open(); <-done })
	<-held
	stray, err := e.p.Create(e.ctx, contexts.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.m.Cleanup(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !e.running(stray.ID()) {
		t.Fatal("the stray was destroyed while a create of the last minutes was under way")
	}
	e.clock.Advance(contexts.DefaultCreatingTimeout + time.Second)
	for range 2 {
		if _, err := e.m.Cleanup(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if e.running(stray.ID()) {
		t.Fatal("a create hung past CreatingTimeout still keeps a stray running")
	}
}

// holdFirstCreate holds p's first create whose spec carries label inside
// the provider's Create (the sandbox already listed when p.ListedEarly)
// until open is called; held receives once it is held. Later creates
// pass. open may be called more than once.
func holdFirstCreate(p *contextstest.Provider, label string) (held <-chan struct{}, open func()) {
	gate, h := make(chan struct{}), make(chan struct{}, 1)
	var release sync.Once
	p.OnCreate = func(spec contexts.Spec) {
		if _, ok := spec.Labels[label]; ok {
			select {
			case h <- struct{}{}:
				<-gate
			default: // only the first is held
			}
		}
	}
	return h, func() { release.Do(func() { close(gate) }) }
}
