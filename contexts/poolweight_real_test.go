package contexts_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
)

// cgroupCPUWeight reads sandbox id's CPU weight from its cgroup (the
// runtime's cgroup layout: sandlot/<id>), cpu.shares on cgroup v1 and
// cpu.weight on v2, and names the figure the default one is.
func cgroupCPUWeight(t *testing.T, id string) (weight, normal int) {
	t.Helper()
	file, normal := filepath.Join("/sys/fs/cgroup/cpu/sandlot", id, "cpu.shares"), 1024
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		file, normal = filepath.Join("/sys/fs/cgroup/sandlot", id, "cpu.weight"), 100
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n, normal
}

// TestRealPoolBackground: on every runtime, a warm pool's sandbox runs at
// a CPU weight below the default while no create has it (its start, agent
// and kernels yield to the sandboxes in use), and the create that takes
// it gets it at the default weight; the refill that follows is low again.
func TestRealPoolBackground(t *testing.T) {
	for _, kind := range []string{"crun", "runc", "runsc"} {
		t.Run(kind, func(t *testing.T) {
			e := newRealEnvOn(t, kind, contexts.Config{PoolSize: 1, PoolPrestart: []string{}})
			e.waitStats("the pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
			member := e.p.created()[0]
			if w, normal := cgroupCPUWeight(t, member); w >= normal {
				t.Errorf("warm sandbox %s: cpu weight %d, want below the default %d", member, w, normal)
			}
			rec, err := e.m.GetOrCreate(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rec.SandboxID != member {
				t.Fatalf("the create got %s, not the warm %s (stats %+v)", rec.SandboxID, member, e.m.Stats())
			}
			if w, normal := cgroupCPUWeight(t, member); w != normal {
				t.Errorf("taken sandbox %s: cpu weight %d, want the default %d", member, w, normal)
			}
			if res := e.exec(ident("t1", "c1", "main"), "sh", "echo ok"); res.Stdout != "ok\n" {
				t.Errorf("first call: %+v", res)
			}
			e.waitStats("the pool to refill", func() bool { return e.m.Stats().PoolSize == 1 })
			refill := slices.DeleteFunc(e.p.created(), func(id string) bool { return id == member })
			if len(refill) != 1 {
				t.Fatalf("sandboxes made besides the first: %v", refill)
			}
			if w, normal := cgroupCPUWeight(t, refill[0]); w >= normal {
				t.Errorf("refilled sandbox %s: cpu weight %d, want below the default %d", refill[0], w, normal)
			}
		})
	}
}
