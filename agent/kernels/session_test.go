package kernels

import (
	"errors"
	"testing"

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
