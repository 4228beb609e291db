package oci

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// testKinds are the runtimes the runtime tests cover. newRuntime skips a
// kind that is not installed (in CI, where scripts/deps.sh installs all
// three, it fails).
var testKinds = []string{KindCrun, KindRunc, KindRunsc}

// newRuntime returns a runtime of kind with a private state dir, skipping
// (failing in CI) when the machine cannot run containers.
func newRuntime(t testing.TB, kind string) *Runtime {
	t.Helper()
	testenv.RequireRoot(t)
	if kind != KindAuto {
		testenv.RequireBinary(t, kind)
	}
	dir, err := os.MkdirTemp("", "sl-oci-")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(context.Background(), Config{Runtime: kind, StateDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		Purge(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever a failed test left running goes too.
		ids, _ := r.List(context.Background())
		for _, id := range ids {
			if err := r.Delete(context.Background(), id); err != nil {
				t.Errorf("cleanup %s: %v", id, err)
			}
		}
		if err := Purge(dir); err != nil {
			t.Errorf("purge state dir: %v", err)
		}
	})
	return r
}

// startProbe creates a sandbox running the probe and connects to it.
func startProbe(t testing.TB, r *Runtime, lim runtime.Limits) (string, *probeConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := runtime.NewID()
	sp := probeSpec(t, r, id)
	if lim != (runtime.Limits{}) {
		sp.Limits = lim
	}
	if err := r.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Delete(context.Background(), id); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
	})
	return id, dialProbe(t, ctx, r, id)
}

func TestSelectAuto(t *testing.T) {
	r := newRuntime(t, KindAuto)
	if _, err := os.Stat("/usr/bin/crun"); err == nil && r.Name() != KindCrun {
		t.Fatalf("auto picked %s; crun is installed and works here", r.Name())
	}
	if r.seccompBPF == "" {
		t.Error("crun's compiled seccomp filter was not kept")
	}
	// A second process finds the probe's record and skips the probe.
	r2, err := New(context.Background(), Config{StateDir: r.StateDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Name() != r.Name() || r2.seccompBPF != r.seccompBPF {
		t.Errorf("second New: %s, bpf kept %v", r2.Name(), r2.seccompBPF == r.seccompBPF)
	}
	if ents, _ := os.ReadDir(filepath.Join(r.StateDir(), "probe")); len(ents) != 0 {
		t.Errorf("probe bundles left: %v", ents)
	}
}

func TestUnknownRuntime(t *testing.T) {
	_, err := New(context.Background(), Config{Runtime: "lxc", StateDir: t.TempDir()})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("err = %v, want invalid_argument", err)
	}
}

// TestRuntimeNotInstalled: naming a runtime that is not installed (runsc,
// here) fails at once with a clear failed_precondition, not at first create.
func TestRuntimeNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New(context.Background(), Config{Runtime: KindRunsc, StateDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "runsc not installed") {
		t.Fatalf("err = %v, want failed_precondition naming runsc", err)
	}
}

func TestLifecycle(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx := context.Background()
			id, p := startProbe(t, r, runtime.Limits{})
			if got := p.sh(t, "id -u; id -g; hostname"); got.Out != "1000\n1000\nsandbox\n" {
				t.Errorf("id/hostname = %q", got.Out)
			}
			st, err := r.State(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != runtime.StatusRunning || st.PID == 0 {
				t.Errorf("state = %+v", st)
			}
			ids, err := r.List(ctx)
			if err != nil || len(ids) != 1 || ids[0] != id {
				t.Errorf("list = %v, %v", ids, err)
			}
			stats, err := r.Stats(ctx, id)
			if err != nil || stats.MemoryBytes == 0 || stats.PIDs == 0 {
				t.Errorf("stats = %+v, %v", stats, err)
			}
			if err := r.Create(ctx, probeSpec(t, r, id)); !errors.Is(err, errdefs.ErrAlreadyExists) {
				t.Errorf("second create: %v, want already_exists", err)
			}
			// SIGTERM is ignored by the probe, as by an init; SIGKILL stops it.
			if err := r.Kill(ctx, id, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, r, id, runtime.StatusStopped)
			if err := r.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, err := r.State(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("state after delete: %v", err)
			}
			if err := r.Delete(ctx, id); err != nil {
				t.Errorf("second delete: %v", err)
			}
			for _, d := range teardown.CgroupDirs(id) {
				if _, err := os.Stat(d); err == nil {
					t.Errorf("cgroup %s left behind", d)
				}
			}
		})
	}
}

func waitStatus(t *testing.T, r *Runtime, id string, want runtime.Status) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := r.State(context.Background(), id)
		if err == nil && st.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("state of %s: %+v, %v; want %s", id, st, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBadID(t *testing.T) {
	r := &Runtime{stateDir: t.TempDir()}
	for _, id := range []string{"", "../x", "A", strings.Repeat("a", 70), "a/b"} {
		if err := r.Create(context.Background(), runtime.Spec{ID: id}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("create %q: %v", id, err)
		}
	}
}
