package oci

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// hybridUnified is where a hybrid cgroup host mounts cgroup v2 beside the v1
// controllers. crun refuses to create containers while it sees this mount
// ("cgroups in hybrid mode not supported"), so crun runs in a mount
// namespace of our own in which it is unmounted.
const hybridUnified = "/sys/fs/cgroup/unified"

// nsLauncher starts crun from one OS thread that lives in a private mount
// namespace: without hybridUnified, and with crun's binary a read-only bind
// of itself (seal, clonedBinaryEnv). A mount namespace is a per-thread
// attribute (unshare(CLONE_NEWNS) copies only the caller's fs_struct), and a
// child forked from that thread inherits it, so crun is started directly,
// with no helper process (unshare(1), sh, umount) per call. Measured on the
// dev machine this saves about 3 ms per runtime invocation over
// `unshare -m sh -c 'umount ... && exec crun'`.
//
// The thread stays locked for the life of the process; the goroutine never
// unlocks it, so Go never reuses it for other work.
//
// The namespace is a copy of the host's taken when it was made, and the
// host's mounts do not propagate into it when the host's / is private (as
// on the dev machine). A start that needs a mount made later (a state
// dir's share, mounted by a Runtime created after the thread) therefore
// refreshes the copy: the thread returns to the host's namespace and
// unshares again.
type nsLauncher struct {
	once sync.Once
	err  error
	reqs chan nsReq
	tid  int // the namespaced thread, for tests
	host int // the process's own mount namespace (fd); read by the thread only
	// sealed holds the binaries (resolved paths) that are read-only binds
	// of themselves in the thread's namespace; read by the thread only.
	sealed map[string]bool
}

type nsReq struct {
	cmd  *exec.Cmd
	need []string // mount points the command must see
	done chan error
}

// needsHybridWorkaround reports whether the host has the hybrid layout.
func needsHybridWorkaround() bool {
	var st unix.Statfs_t
	if err := unix.Statfs(hybridUnified, &st); err != nil {
		return false
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC
}

func (l *nsLauncher) init() error {
	l.once.Do(func() {
		l.reqs = make(chan nsReq)
		ready := make(chan error, 1)
		go l.loop(ready)
		l.err = <-ready
	})
	return l.err
}

func (l *nsLauncher) loop(ready chan<- error) {
	goruntime.LockOSThread()
	// Never UnlockOSThread: the thread's mount namespace differs from the
	// process's, and a locked goroutine that returns takes its thread down.
	host, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		ready <- fmt.Errorf("host mount namespace: %w", err)
		return
	}
	l.host = host
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		ready <- fmt.Errorf("unshare fs: %w", err)
		return
	}
	if err := l.enter(); err != nil {
		ready <- err
		return
	}
	l.tid = unix.Gettid()
	ready <- nil
	for r := range l.reqs {
		if slices.ContainsFunc(r.need, func(m string) bool { return !isMountPoint(m) }) {
			if err := l.refresh(); err != nil {
				r.done <- err
				continue
			}
		}
		if l.seal(r.cmd.Path) {
			r.cmd.Env = append(cmdEnv(r.cmd), clonedBinaryEnv)
		}
		r.done <- r.cmd.Start()
	}
}

// clonedBinaryEnv tells crun that the binary it runs from cannot be
// written. Before every command crun otherwise makes itself a private
// copy to run from (a read-only bind of /proc/self/exe over a temporary
// file, then execveat of it: a second exec and dynamic link, about 7 ms
// of every sandbox create on the dev machine), so that a process of a
// container can never write the runtime's binary through
// /proc/<pid>/exe (CVE-2019-5736). crun skips the copy when this variable
// is set and its binary already lies on a read-only mount; seal makes it
// so once per namespace, with the same guarantee.
const clonedBinaryEnv = "_LIBCONTAINER_CLONED_BINARY=1"

// seal makes bin a read-only bind mount of itself in the thread's
// namespace (once) and reports whether it is one. A binary that cannot be
// sealed runs as before: crun then copies itself.
func (l *nsLauncher) seal(bin string) bool {
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return false
	}
	if l.sealed[real] {
		return true
	}
	if err := unix.Mount(real, real, "", unix.MS_BIND, ""); err != nil {
		return false
	}
	if err := unix.Mount("", real, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		_ = unix.Unmount(real, unix.MNT_DETACH)
		return false
	}
	if l.sealed == nil {
		l.sealed = map[string]bool{}
	}
	l.sealed[real] = true
	return true
}

// cmdEnv is the environment cmd will run with.
func cmdEnv(cmd *exec.Cmd) []string {
	if cmd.Env != nil {
		return cmd.Env
	}
	return os.Environ()
}

// enter gives the thread a new mount namespace without hybridUnified.
func (l *nsLauncher) enter() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	// Keep seeing the host's mounts come and go where they propagate, but
	// never send ours back.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / rslave: %w", err)
	}
	if err := unix.Unmount(hybridUnified, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", hybridUnified, err)
	}
	return nil
}

// refresh replaces the thread's namespace with a fresh copy of the host's.
func (l *nsLauncher) refresh() error {
	clear(l.sealed)
	if err := unix.Setns(l.host, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("return to the host mount namespace: %w", err)
	}
	return l.enter()
}

// start starts cmd from the namespaced thread, which must see the mounts
// at need (the share, an image root, a network namespace a sandbox joins).
func (l *nsLauncher) start(cmd *exec.Cmd, need ...string) error {
	if err := l.init(); err != nil {
		return err
	}
	done := make(chan error, 1)
	l.reqs <- nsReq{cmd: cmd, need: need, done: done}
	return <-done
}

// StartCrun starts cmd, a crun command, the way this package starts crun:
// from the launcher thread, so it sees no hybrid cgroup mount and runs from
// a sealed binary. For measurements of crun beside sandlot's sandboxes.
func StartCrun(cmd *exec.Cmd) error { return launcher.start(cmd) }
