package kernels

import (
	"bytes"
	"errors"
	"runtime"
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
// every command (raw.go). Killing the session ends the wait.
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
