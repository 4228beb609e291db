package kernels

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// A run's command write and the reads and polls of its wait are raw
// system calls: unix.Write, unix.Read and friends enter the scheduler's
// syscall state, which wakes the runtime's monitor thread with a futex
// whenever it sleeps (all Ps idle: the agent between two frames), a
// thread wakeup per call on a warm round trip, after which the monitor
// polls every 20 µs until the agent idles again (agent/internal/rawio).
// Only calls that cannot block qualify: writes of the non-blocking command
// pipe (a full pipe waits in the netpoller, session.send), reads of the
// non-blocking output and result pipes, and polls with no timeout.

// rawWrite is unix.Write on a non-blocking descriptor.
func rawWrite(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// rawRead is unix.Read on a non-blocking descriptor.
func rawRead(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// rawPollNow is unix.Poll(fds, 0): it never waits.
func rawPollNow(fds []unix.PollFd) (int, error) {
	if len(fds) == 0 {
		return 0, nil
	}
	var ts unix.Timespec
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// rawEpollNow is unix.EpollWait(epfd, evs, 0): it never waits.
func rawEpollNow(epfd int, evs []unix.EpollEvent) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}
