package oci

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStatFlags reads the flags field past a command that holds spaces and
// parentheses of its own.
func TestStatFlags(t *testing.T) {
	for stat, want := range map[string]uint64{
		"42 (sandlot-agent) S 1 42 42 0 -1 4194560 120 0 0 0": 4194560,
		"42 (a) b) (c d) R 1 42 42 0 -1 4194308 0 0":          4194308,
	} {
		if got, ok := statFlags([]byte(stat)); !ok || got != want {
			t.Errorf("statFlags(%q) = %d, %v; want %d", stat, got, ok, want)
		}
	}
	for _, bad := range []string{"", "42 (x", "42 (x) S 1 2"} {
		if _, ok := statFlags([]byte(bad)); ok {
			t.Errorf("statFlags(%q) read a field", bad)
		}
	}
}

// TestGone: a running process is not gone; once killed it is, before it
// is reaped (a zombie, whose pidfd polls readable), and after. pidGone,
// which State asks of the pid the runtime reads running, says the same.
func TestGone(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Process.Kill()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	if gone(pid, pidfd) || pidGone(pid) {
		t.Fatal("a running process reads gone")
	}
	if pidGone(0) {
		t.Error("no pid (0) reads gone")
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !gone(pid, pidfd) {
		if time.Now().After(deadline) {
			t.Fatal("a killed process never read gone")
		}
		time.Sleep(time.Millisecond)
	}
	if !pidGone(pid) {
		t.Error("pidGone of a killed, unreaped process: false")
	}
	_ = cmd.Wait()
	if !gone(pid, pidfd) || !pidGone(pid) {
		t.Error("a reaped process does not read gone")
	}
}
