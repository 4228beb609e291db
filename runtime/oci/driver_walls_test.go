package oci

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestCancelLeavesOtherNamespaces: the cleanup of a cancelled create kills
// processes by their argv (the runtime's binary, the sandbox's id), which
// a sandbox's processes can show too. Only the daemon's own user
// namespace's are read and killed: a sandbox's process with such an argv
// is left alone (and costs the scan nothing: its argv, up to megabytes
// with a raised stack limit, is never read), while the same argv in the
// daemon's namespace is killed.
func TestCancelLeavesOtherNamespaces(t *testing.T) {
	const id = "sb-0123456789ab"
	d := driver{r: &Runtime{stateDir: t.TempDir()}, kind: KindCrun, bin: "/usr/local/bin/crun-as-shown"}
	start := func(flags uintptr) *exec.Cmd {
		c := exec.Command("/bin/sh", "-c", "while :; do sleep 1; done", id)
		c.Args[0] = d.bin // what /proc/<pid>/cmdline shows first
		c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Setsid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); c.Wait() })
		return c
	}
	other := start(syscall.CLONE_NEWUSER)
	own := start(0)
	// A pgid no process has: the group the invocation led is gone.
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if !d.endCancelled(gone.Process.Pid, id, time.Now().Add(30*time.Second)) {
		t.Fatal("a process of the invocation is still live")
	}
	if err := own.Wait(); err == nil {
		t.Error("the daemon's namespace's process with the runtime's argv for the sandbox was not killed")
	}
	if !alive(other.Process.Pid) {
		t.Error("a process of another user namespace was killed for its argv")
	}
}
