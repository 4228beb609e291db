package contexts_test

import (
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
)

// TestRealPoolKernels: on the local provider with the pools the daemon
// keeps (the default template's, python started at boot, and one whose
// sandboxes start no kernel), a /v1 create from the pool has its python
// kernel running, and an E2B base create (WarmKernels none) from the pool
// has no python process; asked for python, it starts the kernel then and
// answers.
func TestRealPoolKernels(t *testing.T) {
	e := newRealEnv(t, contexts.Config{PoolSize: 1, PoolWarmKernels: [][]string{{}}})
	e.waitStats("both pools to fill", func() bool { return e.m.Stats().PoolSize == 2 })
	v1, base := ident("t1", "v1", "main"), ident("t1", "base", "main")
	if _, err := e.m.GetOrCreate(e.ctx, v1, contexts.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.GetOrCreate(e.ctx, base, contexts.CreateOptions{WarmKernels: []string{}}); err != nil {
		t.Fatal(err)
	}
	if st := e.m.Stats(); st.PoolHits != 2 || st.PoolMisses != 0 {
		t.Fatalf("pool hits %d, misses %d: both creates should be served warm", st.PoolHits, st.PoolMisses)
	}
	// The processes of a sandbox, one command line a line, read by sh
	// (no kernel of its own).
	procs := func(id contexts.Identity) string {
		t.Helper()
		res := e.exec(id, "sh", `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done`)
		if res.ExitCode != 0 {
			t.Fatalf("%v: list processes: %+v", id, res)
		}
		return res.Stdout
	}
	hasPython := func(id contexts.Identity) bool { return strings.Contains(procs(id), "python") }
	// The prestarted kernel starts when the agent listens: wait for it on
	// the /v1 sandbox. The two warm sandboxes were made at Start, together:
	// by then the base one would have started its own, had it one.
	e.waitStats("the /v1 sandbox's prestarted python", func() bool { return hasPython(v1) })
	if out := procs(base); strings.Contains(out, "python") {
		t.Fatalf("the E2B base sandbox from the pool runs python:\n%s", out)
	}
	if res := e.exec(base, "python", "print(6*7)"); res.Stdout != "42\n" {
		t.Fatalf("python in the base sandbox: %+v", res)
	}
	if !hasPython(base) {
		t.Fatal("the base sandbox's python kernel is not running after its first python call")
	}
}
