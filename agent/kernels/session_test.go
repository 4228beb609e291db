package kernels

import (
	"bytes"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStartRefusesBlockingPipes: the kernel's output is read with raw
// reads (agent/internal/rawio) that are safe only on non-blocking
// descriptors; a start whose SetNonblock failed went on with blocking
// pipes, where a read with nothing to read hangs the agent. It must fail.
func TestStartRefusesBlockingPipes(t *testing.T) {
	failing := errors.New("set nonblock refused")
	setNonblock = func(fd int, nonblocking bool) error { return failing }
	t.Cleanup(func() { setNonblock = unix.SetNonblock })
	s, err := startSession([]string{"/bin/sh", "-c", "sleep 60"}, nil, "/", nil, nil)
	if err == nil {
		s.kill()
		t.Fatal("a kernel started on pipes that could not be made non-blocking")
	}
	if !errors.Is(err, failing) {
		t.Fatalf("start: %v, want the SetNonblock error", err)
	}
}

// TestSendWaitsInThePoller: a command to a kernel that does not read
// fills the command pipe. The write must then wait in Go's netpoller (the
// goroutine "IO wait"), not in a blocking write(2) that holds an OS thread
// ("syscall") and, on the way in, wakes the runtime's monitor thread on
// every command (raw.go). Killing the kernel ends the wait.
func TestSendWaitsInThePoller(t *testing.T) {
	s, err := startSession([]string{"/bin/sh", "-c", "exec sleep 60"}, nil, "/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			s.kill()
		}
	}()
	// A blocking descriptor would stall runtime.Stack below until the
	// kernel exits: check the mode first.
	if fl, err := unix.FcntlInt(uintptr(s.ctrl), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
		t.Fatalf("the command pipe's write end is blocking (flags %#x, %v)", fl, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.send(bytes.Repeat([]byte("x"), 4<<20)) }()

	var state string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if state = sendState(); state == "IO wait" || state == "syscall" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if state != "IO wait" {
		t.Fatalf("send to a kernel that does not read is in state %q, want \"IO wait\"", state)
	}
	select {
	case err := <-done:
		t.Fatalf("send returned %v before the kernel read anything", err)
	default:
	}
	s.kill()
	killed = true
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("send to a killed kernel succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("send still waits after the session was killed")
	}
}

// sendState is the scheduler state of the goroutine inside session.send
// ("IO wait", "syscall", ...), or "" when none is.
func sendState() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "kernels.(*session).send") {
			continue
		}
		head, _, _ := strings.Cut(g, "\n")
		_, st, ok := strings.Cut(head, "[")
		if !ok {
			return "?"
		}
		st, _, _ = strings.Cut(st, "]")
		st, _, _ = strings.Cut(st, ",") // "IO wait, 2 minutes"
		return st
	}
	return ""
}

// TestSendLargerThanThePipe: a command larger than the pipe's buffer is
// written in parts, send waiting in the netpoller while the kernel reads,
// and arrives whole.
func TestSendLargerThanThePipe(t *testing.T) {
	s, err := startSession([]string{"/bin/sh", "-c", "exec wc -c <&3 >&4"}, nil, "/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.kill()
	const size = 4 << 20
	if err := s.send(bytes.Repeat([]byte("x"), size)); err != nil {
		t.Fatalf("send of %d bytes: %v", size, err)
	}
	// End the command stream so wc answers, then read its count from res.
	_ = s.ctrlF.Close()
	s.ctrlF = nil
	s.ctrl = -1
	var got []byte
	deadline := time.Now().Add(20 * time.Second)
	buf := make([]byte, 64)
	for time.Now().Before(deadline) && !bytes.Contains(got, []byte("\n")) {
		if n, err := rawRead(s.res, buf); n > 0 {
			got = append(got, buf[:n]...)
		} else if n == 0 && err == nil {
			break // EOF
		}
		time.Sleep(5 * time.Millisecond)
	}
	if strings.TrimSpace(string(got)) != "4194304" {
		t.Fatalf("the kernel read %q bytes, want 4194304", strings.TrimSpace(string(got)))
	}
}

// TestKillTwice: a second kill closes nothing. Its descriptors' numbers
// may belong to another file by then (a restarted kernel's pipes).
func TestKillTwice(t *testing.T) {
	s, err := startSession([]string{"/bin/sh", "-c", "sleep 60"}, nil, "/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := s.out
	s.kill()
	// The lowest free numbers are the ones kill released: take them.
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for i := 0; i < 8; i++ {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
	}
	if !slices.Contains(fds, out) { // open(2) takes the lowest free number
		t.Fatalf("descriptor %d, released by the kill, was not reused by %v", out, fds)
	}
	s.kill()
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Fatalf("a second kill closed descriptor %d, which another file holds now: %v", fd, err)
		}
	}
}
