package oci

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCancelEndsRuntimeGroup: a runtime invocation cancelled while a child
// it forked goes on working (as `crun run --detach`'s does) takes that
// child with it, and waitGroupGone sees the group end. Before the group
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
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(childPID); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		} else if time.Now().After(deadline) {
			t.Fatal("the runtime's child never started")
		}
	}
	cancel()
	if err := c.Wait(); err == nil {
		t.Fatal("a cancelled runtime reported success")
	}
	if !waitGroupGone(c.Process.Pid, time.Now().Add(30*time.Second)) {
		t.Fatalf("process group %d still has a live process", c.Process.Pid)
	}
	if alive(pid) {
		t.Fatalf("the runtime's child %d outlived the cancel", pid)
	}
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
