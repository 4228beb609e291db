package contexts_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime/oci"
)

// TestRealSuspendWakeMemory suspends a context of a runsc sandbox: the
// sandbox is checkpointed with its memory and stopped (none of its
// processes runs on the host), the record keeps its id, a daemon restart
// leaves it so, and the next call restores it: x = 41 before, x + 1
// answers 42 after, the file kept, the result Restored (not Woken), the
// suspend's image dropped. It logs the host memory the suspended context
// holds, having written 1 MiB (goal < 1 MiB: its writable layer is
// stowed on disk), and the wake to first result (goal < 300 ms).
func TestRealSuspendWakeMemory(t *testing.T) {
	e := newSuspendEnvOn(t, "runsc")
	a := ident("t1", "memory", "main")
	// 1 MiB written: what the goal is for (docs/state.md, "Numbers").
	res := e.exec(a, "x = 41\nopen('/home/user/kept.txt', 'w').write('kept')\nopen('/home/user/blob', 'wb').write(b'b' * (1 << 20))")
	if !res.Success {
		t.Fatalf("setup: %+v", res)
	}
	cid, sid := res.ContextID, res.SandboxID
	start := time.Now()
	rec, err := e.m.Suspend(e.ctx, "t1", cid, 0)
	if err != nil {
		t.Fatal(err)
	}
	suspended := time.Since(start)
	if !rec.Suspended() || !rec.Paused() || rec.SandboxID != sid {
		t.Fatalf("suspended record: %+v, want suspended keeping sandbox %s", rec, sid)
	}
	img := rec.SuspendImage
	held, procs := sandboxHostMemory(t, e.dir, sid)
	if procs != 0 {
		t.Fatalf("%d processes of the suspended sandbox run on the host", procs)
	}
	t.Logf("suspend %v; host memory held while suspended %d bytes (goal < 1 MiB)", suspended, held)
	if held >= 1<<20 {
		t.Errorf("the suspended context holds %d bytes of host memory, goal < 1 MiB", held)
	}
	if _, err := e.m.Suspend(e.ctx, "t1", cid, 0); !errors.Is(err, contexts.ErrSuspended) {
		t.Fatalf("second suspend: %v, want ErrSuspended", err)
	}
	if _, err := e.cat.ByID(e.ctx, img); err != nil {
		t.Fatalf("the suspend's image %s (the fallback of a failed restore): %v", img, err)
	}

	// A cleanup pass and a restart (reconcile) leave it suspended.
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.start()
	got, err := e.m.Get(e.ctx, "t1", cid)
	if err != nil || !got.Suspended() || got.SandboxID != sid {
		t.Fatalf("after a cleanup pass and a restart: %+v, %v", got, err)
	}

	start = time.Now()
	res = e.exec(a, "x + 1")
	t.Logf("wake to first result %v (goal < 300 ms)", time.Since(start))
	if mainResult(res) != "42" || res.SandboxID != sid || !res.Restored || res.Woken {
		t.Fatalf("x + 1 after the wake: %q on %s, restored %v woken %v (%+v); want 42 on %s, restored", mainResult(res), res.SandboxID, res.Restored, res.Woken, res.Error, sid)
	}
	res = e.exec(a, "open('/home/user/kept.txt').read() + str(len(open('/home/user/blob', 'rb').read()))")
	if mainResult(res) != "'kept1048576'" || res.Restored {
		t.Fatalf("the file after the wake: %+v, want 'kept', not restored again", res)
	}
	got, _ = e.m.Get(e.ctx, "t1", cid)
	if got.Suspended() || got.Paused() || got.SuspendImage != "" || got.Template == img {
		t.Fatalf("woken record: %+v", got)
	}
	if _, err := e.cat.ByID(e.ctx, img); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("the suspend's image %s after the wake: %v, want not_found", img, err)
	}

	// Ended while suspended with its memory: the checkpointed sandbox and
	// the image go.
	rec, err = e.m.Suspend(e.ctx, "t1", cid, 0)
	if err != nil || !rec.KeepsMemory() {
		t.Fatalf("second suspend: %+v, %v", rec, err)
	}
	if err := e.m.Terminate(e.ctx, "t1", cid, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	if e.running(sid) {
		t.Fatal("the checkpointed sandbox of an ended context is still there")
	}
	if _, err := e.cat.ByID(e.ctx, rec.SuspendImage); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("the image of an ended context: %v, want not_found", err)
	}
}

// sandboxHostMemory returns the host memory a stopped sandbox holds: the
// resident memory of the host processes of it (its cgroup, or its id in
// their arguments: runsc's sentry and gofer), and the bytes used on its
// host tmpfs mounts (its writable layer, its channel); and how many such
// processes there are.
func sandboxHostMemory(t testing.TB, stateDir, id string) (int64, int) {
	t.Helper()
	var held int64
	procs := 0
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ents {
		dir := filepath.Join("/proc", p.Name())
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil {
			continue
		}
		args, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if !strings.Contains(string(cg), "/"+id+"\n") && !strings.Contains(string(args), id) {
			continue
		}
		procs++
		st, _ := os.ReadFile(filepath.Join(dir, "status"))
		for _, l := range strings.Split(string(st), "\n") {
			var kb int64
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				for _, c := range f[1] {
					kb = kb*10 + int64(c-'0')
				}
				held += kb << 10
			}
		}
	}
	for _, m := range []string{filepath.Join(oci.DefaultShareDir, "roots", id), filepath.Join(stateDir, "chan", id)} {
		// Only a mount of its own: a stowed layer's mount point is an
		// empty directory of the share, whose file system is not the
		// sandbox's.
		var stx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, m, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			t.Fatalf("statx %s: %v", m, err)
		}
		if stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
			continue
		}
		var sfs unix.Statfs_t
		if err := unix.Statfs(m, &sfs); err != nil {
			t.Fatalf("statfs %s: %v", m, err)
		}
		if sfs.Type == unix.TMPFS_MAGIC {
			held += int64(sfs.Blocks-sfs.Bfree) * sfs.Bsize
		}
	}
	return held, procs
}

// TestRealSuspendRestoreFails: when the checkpoint cannot be restored (its
// image is gone here), the wake falls back to the suspend's image: a new
// sandbox with the files, the kernels fresh, and the result says so
// (Woken); the checkpointed sandbox is destroyed.
func TestRealSuspendRestoreFails(t *testing.T) {
	e := newSuspendEnvOn(t, "runsc")
	a := ident("t1", "fallback", "main")
	// 1 MiB written: what the goal is for (docs/state.md, "Numbers").
	res := e.exec(a, "x = 41\nopen('/home/user/kept.txt', 'w').write('kept')\nopen('/home/user/blob', 'wb').write(b'b' * (1 << 20))")
	if !res.Success {
		t.Fatalf("setup: %+v", res)
	}
	cid, sid := res.ContextID, res.SandboxID
	if _, err := e.m.Suspend(e.ctx, "t1", cid, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.dir, "bundles", sid, "checkpoint", "checkpoint.img")); err != nil {
		t.Fatal(err)
	}
	res = e.exec(a, "open('/home/user/kept.txt').read()")
	if mainResult(res) != "'kept'" || !res.Woken || res.Restored || res.SandboxID == sid {
		t.Fatalf("after a failed restore: %q on %s, woken %v restored %v; want 'kept' on a new sandbox, woken", mainResult(res), res.SandboxID, res.Woken, res.Restored)
	}
	if e.running(sid) {
		t.Fatal("the sandbox whose restore failed is still there")
	}
}
