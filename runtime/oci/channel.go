package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// The channel is how the host reaches a sandbox's init (the agent): a unix
// stream socket the init listens on. Nothing the sandbox can write, rename
// or link may be on the host's side of it, so the host never resolves a
// path a sandbox could have changed.
//
// crun and runc: an abstract socket in the sandbox's own network namespace.
// It has no file at all; the host reaches it by creating its socket inside
// that namespace (setns on a locked thread, entered through a pidfd of the
// sandbox's init) and checks with SO_PEERCRED that the listener is that
// init, running as the sandbox's own uid. Code in the sandbox cannot take
// the name while the init holds it, and cannot make a network namespace.
//
// runsc: gVisor's network stack lives inside the sentry, so the socket must
// be a host one (--host-uds=create). The sandbox gets a host directory of
// its own for it: a 64 KiB tmpfs (nosuid, nodev, noexec), never the host's
// disk. The host opens the socket with openat2 below that directory, with
// no symlinks, magic links or mount crossings, checks that it is a socket,
// connects through the opened file (/proc/self/fd/N), and checks that the
// listener is a process of the sandbox's cgroup. Once the host has
// authenticated the init there (before anything else runs in the sandbox)
// it seals the directory (Seal): the tmpfs is remounted read-only, and
// nothing in the sandbox can replace the socket afterwards (a socket on a
// read-only file system still accepts connections).
//
// Either way the peer also proves the sandbox's secret (Spec.Secret) before
// the host trusts it; that part is the caller's (provider/local).
const (
	netnsChannel = "@sandlot-agent"
	runscChannel = "/run/sandlot/agent.sock"
	// chanSize bounds what a runsc sandbox can write to its channel tmpfs.
	chanSize = 64 << 10
)

// Channel implements runtime.Runtime.
func (r *Runtime) Channel() string {
	if r.kind == KindRunsc {
		return runscChannel
	}
	return netnsChannel
}

func (r *Runtime) chanDir(id string) string { return filepath.Join(r.stateDir, "chan", id) }

// mountChannel makes sandbox id's channel directory (runsc): a small
// tmpfs owned by the sandbox's user.
func (r *Runtime) mountChannel(id string, ids IDRange) (string, error) {
	dir := r.chanDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("channel dir: %w", err)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=16,mode=0700,uid=%d,gid=%d", chanSize, ids.Host(UID), ids.Host(GID))
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("channel dir: mount tmpfs: %w", err)
	}
	return dir, nil
}

// unmountChannel removes sandbox id's channel directory, if any.
func (r *Runtime) unmountChannel(id string) error {
	dir := r.chanDir(id)
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("channel dir: unmount: %w", err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("channel dir: %w", err)
	}
	return nil
}

// Dial implements runtime.Runtime.
func (r *Runtime) Dial(ctx context.Context, id string) (net.Conn, error) {
	if err := runtime.CheckID(id); err != nil {
		return nil, err
	}
	info, err := r.sandboxInfo(id)
	if err != nil {
		return nil, err
	}
	if info.kind == KindRunsc {
		return r.dialPath(ctx, id)
	}
	return r.dialNetns(ctx, id, info)
}

// connect connects fd to sa, waiting while the listener's backlog is full
// (EAGAIN), for at most a second and never past ctx.
func connect(ctx context.Context, fd int, sa unix.Sockaddr) error {
	deadline := time.Now().Add(time.Second)
	for {
		err := unix.Connect(fd, sa)
		if !errors.Is(err, unix.EAGAIN) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// DialWait is Dial for a sandbox whose init may not listen yet: it waits
// for the listener for as long as ctx allows, and fails with
// errdefs.ErrNotFound once the init has exited. Under crun and runc the
// socket is made in the sandbox's namespace once and only connect is
// retried on it (a refused unix connect leaves the socket unconnected), so
// a try costs one system call where a Dial reads the pid file and the
// init's cgroups and enters the namespace twice (tens of µs, hundreds of
// tries on a loaded host): the wait no longer takes the CPU the booting
// agent needs. A sandbox created with Spec.Ready is tried once its init
// closes its readiness pipe (ready.go); otherwise tries are 50 µs apart at
// first, then 500 µs.
func (r *Runtime) DialWait(ctx context.Context, id string) (net.Conn, error) {
	if err := runtime.CheckID(id); err != nil {
		return nil, err
	}
	info, err := r.sandboxInfo(id)
	if err != nil {
		return nil, err
	}
	delay := 50 * time.Microsecond
	pause := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*3/2, 500*time.Microsecond)
		return nil
	}
	if info.kind == KindRunsc {
		for {
			c, err := r.dialPath(ctx, id)
			if err == nil || !errors.Is(err, errdefs.ErrUnavailable) {
				return c, err
			}
			if perr := pause(); perr != nil {
				return nil, fmt.Errorf("%w (%v)", err, perr)
			}
		}
	}
	pid, pidfd, fd, err := r.channelSocket(id)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pidfd)
	// A new sandbox's init says when it listens (ready.go): wait for that
	// before the first try, and poll only if a try is refused after it.
	ready := r.takeReady(id)
	if ready != nil {
		defer ready.Close()
	}
	signalled := ready == nil
	sa := &unix.SockaddrUnix{Name: netnsChannel}
	for {
		if !signalled {
			signalled = waitReady(ctx, ready, pidfd)
		}
		err := connect(ctx, fd, sa)
		if err == nil {
			return peerConn(id, fd, pid, info)
		}
		if !errors.Is(err, unix.ECONNREFUSED) {
			unix.Close(fd)
			return nil, connectFailed(id, pid, pidfd, err)
		}
		if exited(pidfd) { // one poll a try: an exiting init is found once its exit completes
			unix.Close(fd)
			return nil, fmt.Errorf("sandbox %s: init %d exited before it listened: %w", id, pid, errdefs.ErrNotFound)
		}
		if !signalled && ctx.Err() == nil {
			continue // waitReady was the pause
		}
		if perr := pause(); perr != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("sandbox %s: channel: nothing listens (%v): %w", id, perr, errdefs.ErrUnavailable)
		}
	}
}

// channelSocket finds the init of a crun or runc sandbox and makes a unix
// socket in its network namespace, for its abstract channel: the init's
// pid, a pidfd of it and the socket, both the caller's to close.
func (r *Runtime) channelSocket(id string) (pid, pidfd, fd int, err error) {
	pid, pidfd, err = r.initProcess(id)
	if err != nil {
		return 0, -1, -1, err
	}
	fd, err = socketIn(pidfd)
	if err != nil {
		defer unix.Close(pidfd)
		if gone(pid, pidfd) { // an exiting init leaves its namespaces: ESRCH
			return 0, -1, -1, fmt.Errorf("sandbox %s: channel: init %d is exiting (%v): %w", id, pid, err, errdefs.ErrNotFound)
		}
		return 0, -1, -1, fmt.Errorf("sandbox %s: channel: %v: %w", id, err, errdefs.ErrUnavailable)
	}
	return pid, pidfd, fd, nil
}

// connectFailed is the error of a connect to sandbox id's channel that
// failed with err: not_found when its init (pid, pidfd) is exiting or has
// exited (its sockets are closed, so the connect is refused or reset),
// unavailable otherwise.
func connectFailed(id string, pid, pidfd int, err error) error {
	if gone(pid, pidfd) {
		return fmt.Errorf("sandbox %s: channel: connect: %v: init %d is exiting: %w", id, err, pid, errdefs.ErrNotFound)
	}
	return fmt.Errorf("sandbox %s: channel: connect: %v: %w", id, err, errdefs.ErrUnavailable)
}

// exited reports whether the process of pidfd has exited (a pidfd polls
// readable from then on, zombie or not).
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// pfExiting is the kernel's PF_EXITING task flag: set when a task enters
// exit, before it closes its files and leaves its namespaces, and well
// before its pidfd polls readable (which waits for its exit to complete)
// or the runtime's state stops reading running (which waits for reaping).
const pfExiting = 0x4

// gone reports whether the process of pid, pinned by pidfd, has exited or
// is exiting. A killed init is in this state from the signal's delivery
// until it is reaped, and everything asked of it then fails (entering its
// namespaces, connecting to its sockets); the runtime's state still reads
// running. While pidfd's process has not exited, pid is still its number,
// so /proc/<pid>/stat is read of that process.
func gone(pid, pidfd int) bool {
	if exited(pidfd) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // reaped since the poll
	}
	flags, ok := statFlags(b)
	return ok && flags&pfExiting != 0
}

// statFlags is the flags field (the ninth) of a /proc/<pid>/stat line. The
// second field, the command in parentheses, may hold spaces and
// parentheses of its own: the fields after it are counted from its last
// ')'.
func statFlags(stat []byte) (uint64, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 7 { // state ppid pgrp session tty_nr tpgid flags
		return 0, false
	}
	v, err := strconv.ParseUint(f[6], 10, 64)
	return v, err == nil
}

// pidGone reports whether host process pid has exited or is exiting (a
// pid of 0 is none: false).
func pidGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH)
	}
	defer unix.Close(pidfd)
	return gone(pid, pidfd)
}

// dialNetns reaches a crun or runc sandbox's abstract socket.
func (r *Runtime) dialNetns(ctx context.Context, id string, info *sandboxInfo) (net.Conn, error) {
	pid, pidfd, fd, err := r.channelSocket(id)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pidfd)
	if err := connect(ctx, fd, &unix.SockaddrUnix{Name: netnsChannel}); err != nil {
		unix.Close(fd)
		return nil, connectFailed(id, pid, pidfd, err)
	}
	return peerConn(id, fd, pid, info)
}

// peerConn checks that the listener at the other end of the connected
// socket fd is the sandbox's init (pid, as the sandbox's uid) and wraps it;
// on failure fd is closed.
func peerConn(id string, fd, pid int, info *sandboxInfo) (net.Conn, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err == nil && (int(cred.Pid) != pid || cred.Uid != info.ids.Host(info.uid)) {
		err = fmt.Errorf("listener is pid %d uid %d, not the sandbox's init (pid %d uid %d)", cred.Pid, cred.Uid, pid, info.ids.Host(info.uid))
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sandbox %s: channel peer: %v: %w", id, err, errdefs.ErrPermissionDenied)
	}
	return fileConn(fd)
}

// initProcess returns the host pid of sandbox id's init and a pidfd that
// pins it. The pid comes from the runtime's pid file in the bundle; it must
// still be a process of the sandbox's cgroup. A pidfd does not keep the
// pid from being reused: the check holds because a reused pid's
// /proc/<pid>/cgroup shows the new process's own cgroups, and a signal 0
// through the pidfd after that read fails (ESRCH) if the process it was
// opened on had already gone, so the read was of that process. An init
// that is exiting (killed, not yet reaped) is gone too, though it takes
// signal 0 and its cgroup may still read as the sandbox's.
func (r *Runtime) initProcess(id string) (int, int, error) {
	b, err := os.ReadFile(filepath.Join(r.bundle(id), "pid"))
	if err != nil {
		return 0, -1, fmt.Errorf("sandbox %s: no init: %w", id, errdefs.ErrNotFound)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, -1, fmt.Errorf("sandbox %s: bad pid file: %w", id, errdefs.ErrNotFound)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return 0, -1, fmt.Errorf("sandbox %s: init %d: %v: %w", id, pid, err, errdefs.ErrNotFound)
	}
	if !inCgroup(pid, id) || unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil || gone(pid, pidfd) {
		unix.Close(pidfd)
		return 0, -1, fmt.Errorf("sandbox %s: init %d is gone: %w", id, pid, errdefs.ErrNotFound)
	}
	return pid, pidfd, nil
}

// inCgroup reports whether host process pid is in sandbox id's cgroup.
func inCgroup(pid int, id string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	want := cgroupParent + "/" + id
	for _, l := range strings.Split(string(b), "\n") {
		// hierarchy-id:controllers:path; v1 "pids" or the v2 line.
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 || parts[2] != want {
			continue
		}
		if parts[1] == "pids" || strings.Contains(parts[1], "pids,") || strings.HasSuffix(parts[1], ",pids") || (parts[0] == "0" && teardown.UnifiedOnly()) {
			return true
		}
	}
	return false
}

// socketIn creates a unix stream socket in the network namespace of the
// process pidfd refers to. An abstract socket address belongs to the
// network namespace its socket was created in, so connecting it later,
// from any thread, reaches that namespace's listener. The thread that
// enters the namespace is locked; it returns to the host's namespace, or,
// when that fails, ends with its goroutine (Go then discards the thread).
func socketIn(pidfd int) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			goruntime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		defer unix.Close(home)
		if err := unix.Setns(pidfd, unix.CLONE_NEWNET); err != nil {
			goruntime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("enter network namespace: %w", err)}
			return
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if unix.Setns(home, unix.CLONE_NEWNET) == nil {
			goruntime.UnlockOSThread()
		}
		ch <- result{fd, err}
	}()
	res := <-ch
	return res.fd, res.err
}

// dialPath reaches a runsc sandbox's socket in its channel directory.
func (r *Runtime) dialPath(ctx context.Context, id string) (net.Conn, error) {
	dir := r.chanDir(id)
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: channel dir: %v: %w", id, err, errdefs.ErrNotFound)
	}
	defer unix.Close(dfd)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(dfd, &sfs); err != nil || sfs.Type != unix.TMPFS_MAGIC {
		return nil, fmt.Errorf("sandbox %s: channel dir is not its tmpfs: %w", id, errdefs.ErrNotFound)
	}
	sfd, err := unix.Openat2(dfd, filepath.Base(runscChannel), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: channel: %v: %w", id, err, errdefs.ErrUnavailable)
	}
	defer unix.Close(sfd)
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("sandbox %s: channel is not a socket: %w", id, errdefs.ErrPermissionDenied)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	// The opened file itself, not its name: the kernel finds the socket by
	// the inode the magic link points at.
	if err := connect(ctx, fd, &unix.SockaddrUnix{Name: fmt.Sprintf("/proc/self/fd/%d", sfd)}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sandbox %s: channel: connect: %v: %w", id, err, errdefs.ErrUnavailable)
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err == nil && !inCgroup(int(cred.Pid), id) {
		err = fmt.Errorf("listener pid %d is not in the sandbox's cgroup", cred.Pid)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sandbox %s: channel peer: %v: %w", id, err, errdefs.ErrPermissionDenied)
	}
	return fileConn(fd)
}

// Seal implements runtime.Runtime. Under runsc it remounts the channel's
// tmpfs read-only (once); crun and runc have nothing to seal. Sealing fails
// (EBUSY) while a file of the directory is being written, which passes
// quickly, or when a file was removed while still in use, which lasts
// and which nothing but tampering causes (the init binds once and keeps its
// socket): that is refused.
func (r *Runtime) Seal(id string) error {
	if err := runtime.CheckID(id); err != nil {
		return err
	}
	info, err := r.sandboxInfo(id)
	if err != nil || info.kind != KindRunsc {
		return err
	}
	dir := r.chanDir(id)
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox %s: channel dir: %v: %w", id, err, errdefs.ErrNotFound)
	}
	defer unix.Close(dfd)
	for delay := 100 * time.Microsecond; ; delay *= 2 {
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(dfd, &sfs); err != nil || sfs.Type != unix.TMPFS_MAGIC {
			return fmt.Errorf("sandbox %s: channel dir is not its tmpfs: %w", id, errdefs.ErrNotFound)
		}
		if sfs.Flags&unix.ST_RDONLY != 0 {
			return nil
		}
		// Without MS_BIND this changes the file system, so the bind mount
		// the sandbox sees turns read-only too.
		err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || delay > time.Second { // ~2 s in all: a loaded host may stall a writer
			return fmt.Errorf("sandbox %s: seal channel: %v: %w", id, err, errdefs.ErrPermissionDenied)
		}
		time.Sleep(delay)
	}
}

// fileConn wraps a connected socket.
func fileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "channel")
	defer f.Close()
	return net.FileConn(f)
}
