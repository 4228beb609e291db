package oci

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCancelEndsRuntimeGroup: a runtime invocation cancelled while a child
// it forked goes on working (as `crun run --detach`'s does) takes that
// child with it, and endCancelled sees the group end. Before the group
// kill, the child outlived the cancel and created the sandbox's cgroups
// after the cleanup had run (an empty cgroup left by
// TestCreateCancelledLeavesNothing, once in many runs).
func TestCancelEndsRuntimeGroup(t *testing.T) {
	dir := t.TempDir()
	childPID := filepath.Join(dir, "child")
	bin := filepath.Join(dir, "runtime")
	script := "#!/bin/sh\nsleep 300 &\necho $! > " + childPID + ".tmp && mv " + childPID + ".tmp " + childPID + "\nexec sleep 300\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d := driver{r: &Runtime{stateDir: dir}, kind: KindRunc, bin: bin}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := d.cmd(ctx, "", "run", "x")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pid := waitPIDFile(t, childPID)
	cancel()
	if err := c.Wait(); err == nil {
		t.Fatal("a cancelled runtime reported success")
	}
	if !d.endCancelled(c.Process.Pid, "x", time.Now().Add(30*time.Second)) {
		t.Fatalf("process group %d still has a live process", c.Process.Pid)
	}
	if alive(pid) {
		t.Fatalf("the runtime's child %d outlived the cancel", pid)
	}
}

// waitPIDFile waits (bounded) for the runtime's child to write its pid to
// path, and returns it.
func waitPIDFile(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if pid, ok := readPIDFile(path); ok {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the runtime's child never started")
		}
	}
}

// readPIDFile reads the pid the runtime's child wrote to path, if it has.
func readPIDFile(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// fakeDetachEnv runs the test binary as a runtime that detaches as
// `crun run --detach` does: the process started forks a copy of itself
// (the same argv) that calls setsid, writes its pid to the file the
// variable names and goes on working, while the first waits for it.
const fakeDetachEnv = "SANDLOT_OCI_FAKE_DETACH"

func fakeDetachMain(pidFile string) {
	if os.Getenv(fakeDetachEnv+"_CHILD") == "" {
		c := reexec(fakeDetachEnv+"_CHILD=1", true)
		if err := c.Start(); err != nil {
			os.Exit(3)
		}
		c.Wait()
		os.Exit(0)
	}
	if writePIDFile(pidFile) != nil {
		os.Exit(4)
	}
	time.Sleep(5 * time.Minute)
	os.Exit(0)
}

// TestCancelEndsDetachedRuntime: a runtime invocation cancelled after the
// child it forked left its process group for a session of its own (as
// `crun run --detach`'s child does, then forks again to do the work) takes
// that child with it too. The group kill alone missed it, and it went on
// to create the sandbox's cgroups after the cleanup had run (empty
// cgroups left by TestCreateCancelledLeavesNothing under load).
func TestCancelEndsDetachedRuntime(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	const id = "sb-0123456789ab"
	d, c, cancel := startFakeRun(t, fakeDetachEnv+"="+pidFile, id, pidFile)
	pid := waitPIDFile(t, pidFile)
	cancel()
	if err := c.Wait(); err == nil {
		t.Fatal("a cancelled runtime reported success")
	}
	if !d.endCancelled(c.Process.Pid, id, time.Now().Add(30*time.Second)) {
		t.Fatal("a process of the cancelled runtime is still live")
	}
	if alive(pid) {
		t.Fatalf("the runtime's detached child %d outlived the cancel", pid)
	}
}

// killFakesAtEnd kills, when t ends, each process whose pid a file of
// pidFiles holds and whose environment holds env ("KEY=value", the test's
// own fake runtime): a fatal path leaves none sleeping out its minutes,
// and a pid reused by another process is left alone.
func killFakesAtEnd(t *testing.T, env string, pidFiles ...string) {
	t.Cleanup(func() {
		for _, f := range pidFiles {
			pid, ok := readPIDFile(f)
			if !ok || !alive(pid) {
				continue
			}
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if err == nil && bytes.Contains(b, []byte(env+"\x00")) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}
