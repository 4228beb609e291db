// Package rawio reads and writes a connection's non-blocking descriptor
// with raw system calls, still waiting in Go's netpoller (and so keeping
// its deadlines) when the descriptor is not ready.
//
// Why: every system call Go makes through syscall.Syscall enters the
// scheduler's syscall state, and when the runtime's monitor thread
// (sysmon) is asleep, as it is whenever all of a process's Ps went idle,
// that entry wakes it with a futex. A warm run_code round trip idles both
// the daemon and the agent between its frames, so each of its reads and
// writes paid a thread wakeup: 7% of the daemon's CPU on the warm bench
// (docs/contexts.md, "Where a warm call's time goes"). A read or write of
// a non-blocking descriptor returns at once (EAGAIN when it would block),
// which is what a raw system call may be used for: it never holds its P
// for longer than the copy.
package rawio

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Conn reads and writes a net.Conn's descriptor with raw system calls.
type Conn struct {
	rc syscall.RawConn
}

// New returns c's raw reader and writer, or nil when c has no descriptor
// of its own the runtime polls (a wrapped or in-memory connection): such
// a connection is used as it is.
func New(c net.Conn) *Conn {
	switch c.(type) {
	case *net.UnixConn, *net.TCPConn:
	default:
		return nil
	}
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil
	}
	return &Conn{rc: rc}
}

// ReadWriter returns what c's frames are read and written through: c's
// raw reader and writer (New) when c has a polled descriptor, else c
// itself. Callers hold the result instead of choosing per call.
func ReadWriter(c net.Conn) io.ReadWriter {
	if r := New(c); r != nil {
		return r
	}
	return c
}

// Read reads into p as net.Conn.Read does: it waits (within the read
// deadline) until some bytes or the end of the stream are there.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n uintptr
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch errno {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

// Write writes all of p as net.Conn.Write does: it waits (within the
// write deadline) while the socket's buffer is full. It returns how many
// bytes were written.
func (c *Conn) Write(p []byte) (int, error) {
	done := 0
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done))
			switch e {
			case 0:
				done += int(n)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return done, err
	case errno != 0:
		return done, os.NewSyscallError("write", errno)
	}
	return done, nil
}
