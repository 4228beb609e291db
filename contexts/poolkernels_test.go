package contexts_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
)

// prestartOf is the kernels rec's sandbox was made to start at boot.
func (e *env) prestartOf(rec *contexts.Record) []string {
	e.t.Helper()
	sb, err := e.p.Attach(e.ctx, rec.SandboxID)
	if err != nil {
		e.t.Fatal(err)
	}
	return sb.(*contextstest.Sandbox).Spec().Prestart
}

// Each pool chooses the kernels its sandboxes start at boot: a create
// asking for none (E2B's base sandbox, CreateOptions.WarmKernels) takes
// from a pool of the template whose sandboxes start none, warmed at Start
// beside the template's own (python); a create asking for nothing in
// particular (/v1) keeps the python pool; a set the operator did not name
// is served by the template's own pool, never a pool of its own.
func TestPoolPerKernels(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 2, PoolWarmKernels: [][]string{{}}})
	waitFor(t, "both pools to fill", func() bool { return e.m.Stats().PoolSize == 4 })
	for i, tc := range []struct {
		name string
		warm []string
		want []string
	}{
		{"no kernel", []string{}, []string{}},
		{"the template's own", nil, []string{"python"}},
		{"a set no pool has", []string{"javascript"}, []string{"python"}},
		{"the template's own, named", []string{"python"}, []string{"python"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.m.Stats().PoolHits
			rec, err := e.m.GetOrCreate(e.ctx, ident("t1", string(rune('a'+i)), "main"), contexts.CreateOptions{WarmKernels: tc.warm})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.m.Stats().PoolHits; got != before+1 {
				t.Fatalf("pool hits %d, want %d: not served warm", got, before+1)
			}
			got := e.prestartOf(rec)
			if diff := cmp.Diff(tc.want, got); diff != "" || (len(tc.want) == 0 && got == nil) {
				t.Errorf("Spec.Prestart (-want +got):\n%s", diff)
			}
			waitFor(t, "the pools to refill", func() bool { return e.m.Stats().PoolSize == 4 })
		})
	}
	// Two pools of one template: its stats add them up.
	if st := e.m.Stats(); st.PerTemplate["default"].PoolSize != 4 || st.PoolMisses != 0 {
		t.Fatalf("stats = %+v", st.PerTemplate["default"])
	}
}

// Without PoolWarmKernels a template keeps one pool, whatever the creates
// ask for: they take its sandboxes (python started), as before pools
// chose their kernels.
func TestPoolWarmKernelsUnnamed(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{WarmKernels: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"python"}, e.prestartOf(rec)); diff != "" {
		t.Errorf("Spec.Prestart (-want +got):\n%s", diff)
	}
	waitFor(t, "pool to refill", func() bool { return e.m.Stats().PoolSize == 1 })
	if st := e.m.Stats(); st.PoolHits != 1 || st.PoolSize != 1 {
		t.Fatalf("stats = %+v: a second pool was made", st)
	}
}

// A template's PoolSpec.Prestart replaces Config.PoolPrestart for its own
// pool; a create the pool cannot serve (here: with an environment) starts
// what it asked for (CreateOptions.Prestart), not the pool's kernels.
func TestPoolSpecPrestart(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1, PoolSpecs: map[string]contexts.PoolSpec{
		"default": {Size: 1, Prestart: []string{"javascript"}}}})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	rec := e.getOrCreate(ident("t1", "c1", "main"))
	if diff := cmp.Diff([]string{"javascript"}, e.prestartOf(rec)); diff != "" {
		t.Errorf("pooled Spec.Prestart (-want +got):\n%s", diff)
	}
	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c2", "main"), contexts.CreateOptions{Env: map[string]string{"A": "1"}, WarmKernels: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.prestartOf(rec); len(got) != 0 {
		t.Errorf("created Spec.Prestart %v, want none", got)
	}
}

// RefreshPool replaces every pool of the template, whatever its kernels.
func TestRefreshPoolEveryKernelSet(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1, PoolWarmKernels: [][]string{{}}})
	waitFor(t, "both pools to fill", func() bool { return e.m.Stats().PoolSize == 2 })
	before := map[string]bool{}
	for _, id := range e.p.Running() {
		before[id] = true
	}
	e.m.RefreshPool("default")
	waitFor(t, "both pools refilled with new sandboxes", func() bool {
		if e.m.Stats().PoolSize != 2 {
			return false
		}
		for _, id := range e.p.Running() {
			if before[id] {
				return false
			}
		}
		return true
	})
}

// A create asking for a kernel set whose pool of a template holds nothing
// yet (no create asked for it: a --pool-sizes template's kernel-less pool,
// such as an E2B desktop's) takes from the template's own pool when that
// starts every kernel asked for, rather than making a cold sandbox: the
// started desktop an E2B create expects is in the own pool.
func TestPoolOwnServesAnUnfilledKernelSet(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: -1, PoolSizes: map[string]int{"desk": 1}, PoolWarmKernels: [][]string{{}, {"javascript"}}})
	waitFor(t, "the template's own pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{Template: "desk", WarmKernels: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.m.Stats(); st.PoolHits != 1 || st.PoolMisses != 0 {
		t.Fatalf("pool hits %d, misses %d: the own pool's warm sandbox should serve the create", st.PoolHits, st.PoolMisses)
	}
	if diff := cmp.Diff([]string{"python"}, e.prestartOf(rec)); diff != "" {
		t.Errorf("Spec.Prestart (-want +got):\n%s", diff)
	}
	// A listed kernel set the own pool does not start is not served by it.
	waitFor(t, "the own pool to refill", func() bool { return e.m.Stats().PoolSize == 1 })
	if _, err := e.m.GetOrCreate(e.ctx, ident("t1", "c2", "main"), contexts.CreateOptions{Template: "desk", WarmKernels: []string{"javascript"}}); err != nil {
		t.Fatal(err)
	}
	if st := e.m.Stats(); st.PoolHits != 1 {
		t.Fatalf("pool hits %d: a create asking for javascript took a python sandbox", st.PoolHits)
	}
}
