package proc

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// A disposition of SIG_IGN survives execve, so a process started with a
// signal ignored hands it to all it starts. The Go runtime replaces most
// with its own handler (which execve resets to the default in a child),
// but leaves SIGHUP and SIGINT ignored when it finds them so, and never
// touches the real-time signals it does not use (32 and 34 on Linux).
// User code should start as a fresh login shell would, with no signal
// ignored, so the reaper's start puts every signal the agent still
// ignores back to its default, before the first child is forked.

// sigaction is the kernel's struct sigaction on amd64 and arm64, the
// agent's architectures.
type sigaction struct {
	handler, flags, restorer uintptr
	mask                     uint64
}

const (
	sigDFL = 0
	sigIGN = 1
	nsig   = 64
)

// resetIgnored sets every signal whose disposition is SIG_IGN to SIG_DFL.
// The agent itself then meets them as a
// process started without them ignored does (the agent as PID 1 takes
// every signal it can to a handler first: cmd/sandlot-agent's
// dropSignals).
func resetIgnored() {
	for sig := 1; sig <= nsig; sig++ {
		var old sigaction
		if rtSigaction(sig, nil, &old) != nil || old.handler != sigIGN {
			continue
		}
		_ = rtSigaction(sig, &sigaction{handler: sigDFL}, nil)
	}
}

// rtSigaction is rt_sigaction(2) itself: libc's and Go's os/signal refuse
// the real-time signals their runtimes reserve.
func rtSigaction(sig int, act, old *sigaction) error {
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), 8, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
