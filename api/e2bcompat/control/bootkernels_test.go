package control_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
)

// TestInterpreterBootsIPython: a code interpreter sandbox starts its
// python kernel with IPython imported at boot (E2B's has its Jupyter
// kernel up when create returns); a base sandbox starts none, and with
// PlainPython neither does the interpreter.
func TestInterpreterBootsIPython(t *testing.T) {
	e := newEnv(t)
	for _, tmpl := range []string{"code-interpreter-v1", "code-interpreter", "base"} {
		e.Create(key1, `{"templateID":"`+tmpl+`"}`)
	}
	want := [][]string{{"ipython"}, {"ipython"}, nil}
	if got := prestarts(e.P); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("boot kernels of code-interpreter-v1, code-interpreter, base: %q, want %q", got, want)
	}

	plain := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{PlainPython: true}})
	plain.Create(key1, `{"templateID":"code-interpreter-v1"}`)
	if got := prestarts(plain.P); len(got) != 1 || got[0] != nil {
		t.Errorf("boot kernels with PlainPython: %q, want none", got)
	}
}

// prestarts are the kernels each sandbox p created was asked to start at
// boot, in order.
func prestarts(p *e2bcompattest.Provider) [][]string {
	var out [][]string
	for _, s := range p.Specs() {
		out = append(out, s.Prestart)
	}
	return out
}

// TestBaseTakesAKernellessWarmSandbox: with the pools the daemon keeps on
// the local provider (the default template's, python started, and one
// whose sandboxes start no kernel), a base sandbox is served from the
// pool without a kernel, and a code interpreter from the python one: the
// base pool's refills start no python on the CPU the creates share.
func TestBaseTakesAKernellessWarmSandbox(t *testing.T) {
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Manager: contexts.Config{PoolSize: 1, PoolWarmKernels: [][]string{{}}}})
	full := func() bool { return e.M.Stats().PoolSize == 2 }
	deadline := time.Now().Add(30 * time.Second)
	for !full() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !full() {
		t.Fatal("the pools did not fill")
	}
	e.Create(key1, `{"templateID":"base"}`)
	e.Create(key1, `{"templateID":"code-interpreter-v1"}`)
	if st := e.M.Stats(); st.PoolHits != 2 || st.PoolMisses != 0 {
		t.Fatalf("pool hits %d, misses %d, want 2 and 0", st.PoolHits, st.PoolMisses)
	}
	recs, err := e.M.List(t.Context(), contexts.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	specs := e.P.Specs()
	got := map[string][]string{}
	for _, rec := range recs {
		var n int
		if _, err := fmt.Sscanf(rec.SandboxID, "e2bfake-%d", &n); err != nil || n < 1 || n > len(specs) {
			t.Fatalf("sandbox id %q", rec.SandboxID)
		}
		if specs[n-1].Labels["sandlot.pool"] == "" {
			t.Errorf("%s: not a warm sandbox", rec.TemplateName)
		}
		got[rec.TemplateName] = specs[n-1].Prestart
	}
	if len(got) != 2 || got["base"] == nil || len(got["base"]) != 0 || !slices.Equal(got["code-interpreter-v1"], []string{"python"}) {
		t.Fatalf("warm sandboxes' boot kernels by template %q, want base none, code-interpreter-v1 python", got)
	}
}
