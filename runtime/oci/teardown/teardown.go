// Package teardown ends what a sandbox of runtime/oci holds on the host
// outside its bundle: the processes and cgroups of sandlot/<id> in every
// hierarchy, and its image root's mounts. runtime/oci's delete uses it, and
// so do tests that clean up after a daemon (internal/testenv), which cannot
// import runtime/oci: its own tests import them.
package teardown

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CgroupRoot is where the cgroup hierarchies (v1's controllers, or v2's
// one) are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// CgroupParent groups every sandbox's cgroups: <CgroupRoot>/<ctl>/sandlot/<id>.
const CgroupParent = "/sandlot"

// UnifiedOnly reports a pure cgroup v2 host.
func UnifiedOnly() bool {
	_, err := os.Stat(filepath.Join(CgroupRoot, "cgroup.controllers"))
	return err == nil
}

// CgroupDirs returns sandbox id's cgroup directory in every mounted
// hierarchy (whether it exists or not).
func CgroupDirs(id string) []string {
	if UnifiedOnly() {
		return []string{filepath.Join(CgroupRoot, CgroupParent, id)}
	}
	ents, err := os.ReadDir(CgroupRoot)
	if err != nil {
		return nil
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() || e.Type()&fs.ModeSymlink == 0 {
			dirs = append(dirs, filepath.Join(CgroupRoot, e.Name(), CgroupParent, id))
		}
	}
	return dirs
}

// Thaw makes sure no process in dirs (CgroupDirs) stays frozen: a frozen
// task cannot die of SIGKILL until it is thawed, so a delete of a paused
// sandbox would wait for its cgroups in vain. It writes the v1 freezer's
// state (or v2's cgroup.freeze) directly: the sandbox is being deleted,
// and the runtime's resume would refuse a container it finds half gone.
func Thaw(dirs []string) {
	for _, d := range dirs {
		// Only the freezer hierarchy (v1) or the unified one (v2) has the
		// file.
		switch h := filepath.Base(filepath.Dir(filepath.Dir(d))); {
		case strings.Contains(h, "freezer"):
			_ = os.WriteFile(filepath.Join(d, "freezer.state"), []byte("THAWED"), 0)
		case h == "cgroup" || h == "unified":
			_ = os.WriteFile(filepath.Join(d, "cgroup.freeze"), []byte("0"), 0)
		}
	}
}

// DefaultBound is how long RemoveCgroups keeps trying (runtime/oci's
// delete and suspend).
const DefaultBound = 5 * time.Second

// RemoveCgroups removes sandbox id's cgroups (dirs, CgroupDirs(id)),
// killing what is left in them: a cgroup can only be removed once its last
// task is gone. A removal that finds a cgroup busy sends SIGKILL to every
// process listed in it (KillProcs) and waits for them to exit on their
// pidfds, then tries again; one busy with none to kill has cgroups of its
// own made inside it, removed first the same way; one still busy is
// retried a little later each time, for DefaultBound at most (or until
// ctx ends). The rmdir is the check
// that none is left, in each hierarchy: a create cancelled while the
// runtime moved its child into the cgroups may leave a process in some of
// them only, and one forked between a read and the kill is met on the next
// try (the pids limit bounds each). Killing the init alone would end its
// pid namespace; this kills whatever the cgroups hold.
func RemoveCgroups(ctx context.Context, id string, dirs []string) error {
	return RemoveCgroupsWithin(ctx, id, dirs, DefaultBound)
}

// RemoveCgroupsWithin is RemoveCgroups trying for bound instead of
// DefaultBound: for tests' cleanup after a daemon (testenv.KillSandbox),
// which may wait longer on a loaded machine than a delete should.
func RemoveCgroupsWithin(ctx context.Context, id string, dirs []string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for _, d := range dirs {
		if err := removeCgroup(ctx, id, d, deadline); err != nil {
			return err
		}
	}
	return nil
}

func removeCgroup(ctx context.Context, id, d string, deadline time.Time) error {
	wait := 250 * time.Microsecond
	for {
		err := unix.Rmdir(d)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("remove cgroup %s: %w", d, err)
		}
		if errors.Is(err, unix.EBUSY) {
			if fds := KillProcs(d, id); len(fds) > 0 {
				// Woken as they exit; one slow to die is met again
				// (and signalled again) on the next try.
				until := time.Now().Add(time.Second)
				if until.After(deadline) {
					until = deadline
				}
				WaitExited(fds, until)
				continue
			}
			if sub := children(d); len(sub) > 0 {
				for _, c := range sub {
					if err := removeCgroup(ctx, id, c, deadline); err != nil {
						return err
					}
				}
				continue
			}
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Millisecond)
	}
}

// children lists the cgroups made inside cgroup d.
func children(d string) []string {
	ents, _ := os.ReadDir(d)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(d, e.Name()))
		}
	}
	return out
}

// KillProcs sends SIGKILL to every process listed in cgroup dir that is
// in one of sandbox id's cgroups, and returns pidfds of those it
// signalled, for the caller to wait on (WaitExited). Each round signals
// every listed pid again: a second SIGKILL is harmless, and a pid number
// already signalled may since name another process of the sandbox
// (reused).
func KillProcs(dir, id string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var fds []int
	for _, f := range bytes.Fields(b) {
		pid, err := strconv.Atoi(string(f))
		if err != nil || pid <= 0 {
			continue
		}
		if fd := killIn(pid, id); fd >= 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}

// killIn sends SIGKILL to host process pid if it is (still) in one of
// sandbox id's cgroups, and returns the pidfd it signalled through (-1:
// not signalled). A pidfd does not keep the pid from being reused; the
// check holds because the signal goes through the pidfd (ESRCH once the
// process it was opened on is gone, whatever now has its number) and a
// reused pid's /proc/<pid>/cgroup shows the new process's own cgroups.
func killIn(pid int, id string) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1 // gone
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && inAnyCgroup(b, id) {
		if unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0) == nil {
			return fd
		}
	}
	unix.Close(fd)
	return -1
}

// WaitExited waits until every process of pidfds has exited (its pidfd
// polls readable; by then it has left its cgroups) or until deadline, and
// closes them.
func WaitExited(pidfds []int, deadline time.Time) {
	defer func() {
		for _, fd := range pidfds {
			unix.Close(fd)
		}
	}()
	pfds := make([]unix.PollFd, len(pidfds))
	for i, fd := range pidfds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for len(pfds) > 0 {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			return
		}
		if _, err := unix.Poll(pfds, ms); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		pfds = slices.DeleteFunc(pfds, func(p unix.PollFd) bool { return p.Revents != 0 })
		for i := range pfds {
			pfds[i].Revents = 0
		}
	}
}

// inAnyCgroup reports whether a /proc/<pid>/cgroup text places the process
// in sandbox id's cgroup (or one made inside it) in any hierarchy.
func inAnyCgroup(procCgroup []byte, id string) bool {
	want := []byte(":" + CgroupParent + "/" + id)
	inside := []byte(":" + CgroupParent + "/" + id + "/")
	for _, l := range bytes.Split(procCgroup, []byte{'\n'}) {
		if bytes.HasSuffix(l, want) || bytes.Contains(l, inside) {
			return true
		}
	}
	return false
}

// UnmountImageRoot removes an image root dir (runtime/oci's
// <share>/roots/<id>), if any: the overlay, then the writable layer with
// everything in it. Nothing of the sandbox's tree is walked on the host.
func UnmountImageRoot(dir string) error {
	for _, m := range []string{filepath.Join(dir, "root"), dir} {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("image root: unmount: %w", err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("image root: %w", err)
	}
	return nil
}
