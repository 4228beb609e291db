package oci

// Removing a sandbox: whatever state its runtime left, including a create
// cancelled halfway through the runtime's run.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// deleteBundle force-deletes the container, makes sure its cgroups are
// gone and removes the bundle directory. The runtime's own delete may find
// no container, or only a state its run did not finish writing (a create
// cancelled inside `crun run`, whose init may already be running): then
// every process left in the sandbox's cgroups is killed here, and the
// runtime's state directory removed.
func (r *Runtime) deleteBundle(ctx context.Context, d driver, id, dir string) error {
	thaw(id) // a paused sandbox's tasks die only once thawed
	_, err := d.output(ctx, "delete", "--force", id)
	gone := errors.Is(err, errdefs.ErrNotFound)
	if err != nil && !gone {
		return err
	}
	if err := killCgroups(ctx, id); err != nil {
		return err
	}
	if err := removeCgroups(ctx, id); err != nil {
		return err
	}
	if gone && d.kind != KindRunsc {
		// crun and runc keep a directory per container under --root; one
		// their delete could not load is removed here (runsc names its
		// files otherwise and removes them itself).
		if err := os.RemoveAll(filepath.Join(r.stateDir, d.kind, id)); err != nil {
			return fmt.Errorf("remove %s state: %w", d.kind, err)
		}
	}
	// Every process of the sandbox is gone (its cgroups could be removed):
	// its id range and channel can go too.
	if err := r.unmountChannel(id); err != nil {
		return err
	}
	r.removeShareFiles(filepath.Join(dir, "config.json"))
	if err := r.unmountImageRoot(id); err != nil {
		return err
	}
	if err := r.removeNull(id); err != nil {
		return err
	}
	ids, idErr := readIDRange(filepath.Join(dir, "config.json"))
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove bundle: %w", err)
	}
	r.info.Delete(id)
	r.dropReady(id)
	if idErr == nil {
		if err := r.ids.free(id, ids); err != nil {
			return fmt.Errorf("free id range: %w", err)
		}
	}
	return nil
}

// killCgroups sends SIGKILL to every process in sandbox id's cgroups, in
// rounds until none is left (a process forked between the read and the
// kill is met in the next round; the pids limit bounds each round).
// Killing the init alone would end its pid namespace, but a create
// cancelled while the runtime moved its child into the cgroups may leave
// a process in some hierarchies only. After a runtime delete that worked
// the cgroups are already empty: one read each.
func killCgroups(ctx context.Context, id string) error {
	deadline := time.Now().Add(5 * time.Second)
	dirs := cgroupDirs(id)
	for {
		found := false
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range bytes.Fields(b) {
				pid, err := strconv.Atoi(string(f))
				if err != nil || pid <= 0 {
					continue
				}
				if killIn(pid, id) {
					found = true
				}
			}
		}
		if !found {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("sandbox %s: processes left in its cgroups after SIGKILL", id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// killIn sends SIGKILL to host process pid if it is (still) in one of
// sandbox id's cgroups, checked while a pidfd keeps the pid from being
// reused. It reports whether the process was there.
func killIn(pid int, id string) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false // gone
	}
	defer unix.Close(fd)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil || !inAnyCgroup(b, id) {
		return false
	}
	err = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
	return err == nil
}

// inAnyCgroup reports whether a /proc/<pid>/cgroup text places the process
// in sandbox id's cgroup in any hierarchy.
func inAnyCgroup(procCgroup []byte, id string) bool {
	want := []byte(":" + cgroupParent + "/" + id)
	for _, l := range bytes.Split(procCgroup, []byte{'\n'}) {
		if bytes.HasSuffix(l, want) {
			return true
		}
	}
	return false
}
