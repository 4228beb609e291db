package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// cpuWeight reads sandbox id's CPU weight from its cgroup: cpu.shares on
// cgroup v1, cpu.weight on v2.
func cpuWeight(t *testing.T, id string) int {
	t.Helper()
	file := filepath.Join(cgroupRoot, "cpu", cgroupParent, id, "cpu.shares")
	if unifiedOnly() {
		file = filepath.Join(cgroupRoot, cgroupParent, id, "cpu.weight")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBackground: a sandbox created with Spec.Background has the lowest
// CPU weight in its cgroup, and its init runs in that cgroup; Foreground
// gives it the default one, which a sandbox created without it has from
// the start. On every runtime, with the real binaries.
func TestBackground(t *testing.T) {
	low, normal := sharesBackground, sharesDefault
	if unifiedOnly() {
		low, normal = 1, weightDefault
	}
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			bg, plain := runtime.NewID(), runtime.NewID()
			for _, id := range []string{bg, plain} {
				sp := probeSpec(t, r, id)
				sp.Background = id == bg
				if err := r.Create(ctx, sp); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Delete(context.Background(), id) })
			}
			if got := cpuWeight(t, bg); got != low {
				t.Errorf("background sandbox's weight %d, want %d", got, low)
			}
			if got := cpuWeight(t, plain); got != normal {
				t.Errorf("plain sandbox's weight %d, want %d", got, normal)
			}
			st, err := r.State(ctx, bg)
			if err != nil {
				t.Fatal(err)
			}
			cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(st.PID), "cgroup"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(cg), cgroupParent+"/"+bg) {
				t.Errorf("the background sandbox's init is not in its cgroup:\n%s", cg)
			}
			if err := r.Foreground(ctx, bg); err != nil {
				t.Fatal(err)
			}
			if got := cpuWeight(t, bg); got != normal {
				t.Errorf("weight after Foreground %d, want %d", got, normal)
			}
			if err := r.Foreground(ctx, plain); err != nil || cpuWeight(t, plain) != normal {
				t.Errorf("Foreground of a plain sandbox: %v, weight %d", err, cpuWeight(t, plain))
			}
			if err := r.Foreground(ctx, runtime.NewID()); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("Foreground of an unknown sandbox: %v, want not_found", err)
			}
		})
	}
}
