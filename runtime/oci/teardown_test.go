package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// TestDeleteHalfWritten: a runtime killed in the middle of its run (the
// create's context cancelled) leaves its state half-written: crun's
// directory without config.json, runc's without state.json, with the
// sandbox's init already running in its cgroups. Delete must still remove
// everything: the processes, the cgroups, the runtime's state, the bundle
// and the id range. Before, crun's delete failed ("error loading
// config.json") and nothing was removed; runc's said the container does
// not exist and the cgroups stayed busy with the running init.
func TestDeleteHalfWritten(t *testing.T) {
	for kind, file := range map[string]string{KindCrun: "config.json", KindRunc: "state.json"} {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			id := createProbe(t, ctx, r)
			st, err := r.State(ctx, id)
			if err != nil || st.PID <= 0 {
				t.Fatalf("state = %+v, %v", st, err)
			}
			if err := os.Remove(filepath.Join(r.stateDir, kind, id, file)); err != nil {
				t.Fatal(err)
			}
			if err := r.Delete(ctx, id); err != nil {
				t.Fatalf("delete of a half-written sandbox: %v", err)
			}
			// The init was killed; the host's PID 1 reaps it, maybe lazily.
			var left []string
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				left = nil
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", st.PID)); err == nil && strings.Contains(string(b), cgroupParent+"/"+id) {
					left = append(left, "the init, in the sandbox's cgroup")
				}
				if len(left) == 0 || time.Now().After(deadline) {
					break
				}
			}
			for _, d := range teardown.CgroupDirs(id) {
				if _, err := os.Stat(d); err == nil {
					left = append(left, "cgroup "+d)
				}
			}
			for _, p := range []string{r.bundle(id), filepath.Join(r.stateDir, kind, id)} {
				if _, err := os.Lstat(p); err == nil {
					left = append(left, p)
				}
			}
			if n, err := r.HeldIDRanges(); err != nil || n != 0 {
				left = append(left, "id ranges held")
			}
			if len(left) > 0 {
				t.Errorf("left after delete: %q", left)
			}
		})
	}
}

// TestRemoveRuntimeDirMounted: runc mounts a copy of its binary in the
// container's directory under --root while it starts (runc.XXXXXX) and a
// runc killed in between leaves it mounted; the delete must still remove
// the directory (a plain RemoveAll failed with EBUSY and left the mount in
// the host's namespace).
func TestRemoveRuntimeDirMounted(t *testing.T) {
	testenv.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "runc", runtime.NewID())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "runc.abcdef")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/self/exe", target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	if err := removeRuntimeDir(dir); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Error("the directory is still there")
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(b), target) {
		t.Errorf("the mount is still there (%v)", err)
	}
}

// TestDeleteVanished: a daemon run as a container's PID 1 takes its
// sandboxes' processes with its pid namespace when it stops, and their
// bundles and runtime state with the container's /run/sandlot, while their
// cgroups stay on the host. The next daemon's Delete of such a sandbox
// must still remove its empty cgroups, and leave a busy one alone. Before,
// Delete returned at the missing bundle and every cgroup stayed.
func TestDeleteVanished(t *testing.T) {
	for _, kind := range []string{KindCrun, KindRunc} {
		for _, busy := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/busy=%v", kind, busy), func(t *testing.T) {
				r := newRuntime(t, kind)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				id := createProbe(t, ctx, r)
				// The bundle and the runtime's state are moved aside, as a
				// vanished container took them, and put back at the end
				// for the full teardown.
				aside := map[string]string{r.bundle(id): r.bundle(id) + ".aside",
					filepath.Join(r.stateDir, kind, id): filepath.Join(r.stateDir, kind, id+".aside")}
				for from, to := range aside {
					if err := os.Rename(from, to); err != nil {
						t.Fatal(err)
					}
				}
				t.Cleanup(func() {
					for from, to := range aside {
						_ = os.Rename(to, from)
					}
					if err := r.Delete(context.Background(), id); err != nil {
						t.Errorf("cleanup delete: %v", err)
					}
				})
				cgs := teardown.CgroupDirs(id)
				if !busy {
					killAll(t, id, cgs)
				}
				if err := r.Delete(ctx, id); err != nil {
					t.Fatalf("delete of a vanished sandbox: %v", err)
				}
				var there []string
				for _, d := range cgs {
					if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
						there = append(there, d)
					}
				}
				switch {
				case !busy && len(there) > 0:
					t.Errorf("empty cgroups left after delete: %q", there)
				case busy && len(there) == 0:
					t.Error("the busy sandbox's cgroups were removed")
				case busy:
					if b, err := os.ReadFile(filepath.Join(there[0], "cgroup.procs")); err != nil || len(strings.Fields(string(b))) == 0 {
						t.Errorf("the busy cgroup %s lost its processes (%v)", there[0], err)
					}
				}
			})
		}
	}
}

// killAll kills every process in the sandbox's cgroups and waits, bounded,
// until none is listed (the host's PID 1 reaps the init, maybe lazily).
func killAll(t *testing.T, id string, cgs []string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		left := false
		for _, d := range cgs {
			if fds := teardown.KillProcs(d, id); len(fds) > 0 {
				left = true
				teardown.WaitExited(fds, time.Now().Add(time.Second))
			}
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				left = true
			}
		}
		if !left {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox's processes outlived their kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
