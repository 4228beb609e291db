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
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
	"golang.org/x/sys/unix"
)

// counterSpec runs a python process that counts in memory and writes the
// count to the channel directory (runsc's, on the host) every 20 ms.
func counterSpec(id string) runtime.Spec {
	code := "import time\nn = 0\nwhile True:\n    n += 1\n    open('/run/sandlot/n.tmp', 'w').write(str(n))\n    __import__('os').rename('/run/sandlot/n.tmp', '/run/sandlot/n')\n    time.sleep(0.02)\n"
	return runtime.Spec{ID: id, Args: []string{"/usr/bin/python3", "-c", code},
		Limits: runtime.Limits{MemoryBytes: 256 << 20, PIDs: 64, DiskBytes: 16 << 20}}
}

// waitCount waits until the counter's file reads a count other than
// not and more than after, and returns it.
func waitCount(t testing.TB, r *Runtime, id string, after, not int) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(r.chanDir(id), "n"))
		if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && n > after && n != not {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counter of %s did not pass %d: %q %v", id, after, b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCheckpointRestore: under runsc a checkpoint stops the sandbox with
// nothing of it running on the host, and the restore continues the same
// process with its memory (the count goes on, it does not start again).
// crun and runc refuse with failed_precondition.
func TestCheckpointRestore(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if kind != KindRunsc {
				id, _ := startProbe(t, r, runtime.Limits{})
				err := r.Checkpoint(ctx, id, t.TempDir())
				if !errors.Is(err, errdefs.ErrFailedPrecondition) || r.CanCheckpoint() {
					t.Fatalf("checkpoint under %s = %v (can %v), want failed_precondition", kind, err, r.CanCheckpoint())
				}
				return
			}
			id := runtime.NewID()
			if err := r.Create(ctx, counterSpec(id)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Delete(context.Background(), id) })
			waitCount(t, r, id, 20, -1)
			img := t.TempDir()
			if err := r.Checkpoint(ctx, id, img); err != nil {
				t.Fatal(err)
			}
			saved := waitCount(t, r, id, 0, -1)
			st, err := r.State(ctx, id)
			if err != nil || st.Status != runtime.StatusStopped {
				t.Fatalf("after a checkpoint: %+v %v, want stopped", st, err)
			}
			for _, d := range teardown.CgroupDirs(id) {
				if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("cgroup %s left while checkpointed: %v", d, err)
				}
			}
			time.Sleep(100 * time.Millisecond)
			if n := waitCount(t, r, id, 0, -1); n != saved {
				t.Fatalf("the counter moved from %d to %d while checkpointed", saved, n)
			}
			if err := r.Restore(ctx, id, img); err != nil {
				t.Fatal(err)
			}
			// The first count written after the restore: a fresh process
			// would write 1, the restored one goes on from saved.
			if next := waitCount(t, r, id, 0, saved); next <= saved {
				t.Fatalf("counter %d after the restore, want above %d: the process started again", next, saved)
			}
			if st, err := r.State(ctx, id); err != nil || st.Status != runtime.StatusRunning {
				t.Fatalf("after restore: %+v %v", st, err)
			}
			if err := r.Restore(ctx, id, img); !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Fatalf("restore of a running sandbox = %v, want failed_precondition", err)
			}
		})
	}
}

// TestCheckpointNotOnTmpfs: a state dir on a tmpfs holds a checkpoint in
// the host's memory, so a runtime there does not checkpoint.
func TestCheckpointNotOnTmpfs(t *testing.T) {
	testenv.RequireRoot(t)
	disk, mem := t.TempDir(), t.TempDir()
	if err := unix.Mount("tmpfs", mem, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mem, unix.MNT_DETACH) })
	if onTmpfs(disk) == onTmpfs(mem) || !onTmpfs(mem) {
		t.Fatalf("onTmpfs: %s %v, %s (a tmpfs) %v", disk, onTmpfs(disk), mem, onTmpfs(mem))
	}
	r := &Runtime{kind: KindRunsc, stateDir: mem, stateTmpfs: onTmpfs(mem)} // as New sets it
	if r.CanCheckpoint() {
		t.Error("runsc on a tmpfs state dir can checkpoint")
	}
}

// TestReopenedMark: Reopened reads the bundle's mark, the one Restore
// writes and the one docs/install.md ("Upgrade") has an operator make by
// hand for a sandbox an older daemon restored without it; a bundle it
// cannot tell about, or a bad id, counts as reopened (sealed).
func TestReopenedMark(t *testing.T) {
	r := &Runtime{stateDir: t.TempDir()}
	if err := os.MkdirAll(r.bundle("plain"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.bundle("marked"), 0o700); err != nil {
		t.Fatal(err)
	}
	// As `install -m 0600 /dev/null STATE_DIR/bundles/ID/reopened` does.
	if err := os.WriteFile(filepath.Join(r.bundle("marked"), "reopened"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{{"plain", false}, {"marked", true}, {"../x", true}} {
		if got := r.Reopened(tc.id); got != tc.want {
			t.Errorf("Reopened(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}
