package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent/pid1"
)

// TestReserveWithoutRequests: an agent that gets no request (a sandbox of
// a warm pool waiting to be taken) still makes its thread reserve on its
// own, soon after it listens: the reserve does not wait for a first
// request to ask for it. GOMAXPROCS=1 as the host starts it.
func TestReserveWithoutRequests(t *testing.T) {
	dir := t.TempDir()
	bin := buildStatic(t, dir)
	rr, rw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	cmd := exec.Command(bin, "--socket", filepath.Join(dir, "agent.sock"), "--home", filepath.Join(dir, "home"), "--ready-fd", "3")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.ExtraFiles = []*os.File{rw}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	if _, err := io.Copy(io.Discard, rr); err != nil { // the agent listens
		t.Fatal(err)
	}
	taskDir := fmt.Sprintf("/proc/%d/task", cmd.Process.Pid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		tasks, err := os.ReadDir(taskDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) >= pid1.ThreadReserve {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d threads 30 s after the agent listened with no request, want at least %d", len(tasks), pid1.ThreadReserve)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
