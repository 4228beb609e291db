//go:build amd64 || arm64

package proc

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sigaction is the kernel's struct sigaction on amd64 and arm64, the
// agent's architectures.
type sigaction struct {
	handler, flags, restorer uintptr
	mask                     uint64
}

const (
	sigDFL = 0
	sigIGN = 1
)

// ignored reports whether sig's disposition is SIG_IGN.
func ignored(sig int) bool {
	var old sigaction
	return rtSigaction(sig, nil, &old) == nil && old.handler == sigIGN
}

// setDefault sets sig's disposition to SIG_DFL.
func setDefault(sig int) {
	_ = rtSigaction(sig, &sigaction{handler: sigDFL}, nil)
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
