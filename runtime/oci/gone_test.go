package oci

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// is reaped (a zombie, whose pidfd polls readable), and InitGone reads the
// same through a bundle's pid file, and after the reaping too.
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
	r := &Runtime{stateDir: t.TempDir()}
	id := "sb-000000000001"
	if err := os.MkdirAll(r.bundle(id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.bundle(id), "pid"), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	if gone(pid, pidfd) || r.InitGone(id) {
		t.Fatal("a running process reads gone")
	}
	if r.InitGone("sb-000000000002") || r.InitGone("../x") {
		t.Error("a sandbox with no pid file (or a bad id) reads gone: the caller could not ask its state")
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
	if !r.InitGone(id) {
		t.Error("InitGone of a killed, unreaped init: false")
	}
	_ = cmd.Wait()
	if !gone(pid, pidfd) || !r.InitGone(id) {
		t.Error("a reaped process does not read gone")
	}
}
