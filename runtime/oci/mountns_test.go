package oci

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestLauncherSealsBinary attacks the runtime binary as CVE-2019-5736 did:
// a process that can see a runtime started by the launcher keeps an
// O_PATH handle on its /proc/<pid>/exe and, once the runtime has exited
// (no longer "text busy"), reopens that handle for writing to replace the
// binary the next sandbox runs. crun is told not to copy itself first
// (clonedBinaryEnv) only because the launcher runs it from a read-only
// bind: the reopen must fail with EROFS. The bind stays in the launcher's
// namespace: the host's file is as writable as before.
func TestLauncherSealsBinary(t *testing.T) {
	testenv.RequireRoot(t)
	bin := filepath.Join(t.TempDir(), "runtime-bin")
	src, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "30")
	if err := launcher.start(cmd); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Start returns once the exec began (the close-on-exec pipe closed),
	// which is before the kernel has laid out the new environment:
	// /proc/<pid>/environ reads empty until then.
	var environ []byte
	for deadline := time.Now().Add(5 * time.Second); len(environ) == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if environ, err = os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Contains(environ, []byte(clonedBinaryEnv+"\x00")) {
		t.Errorf("the runtime was not told its binary is sealed: %q missing", clonedBinaryEnv)
	}
	exe, err := unix.Open(fmt.Sprintf("/proc/%d/exe", pid), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(exe)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", exe), os.O_WRONLY, 0)
	if err == nil {
		_, _ = f.Write([]byte("#!/bin/sh\necho pwned\n"))
		f.Close()
		t.Fatal("the runtime's binary was reopened for writing through /proc/<pid>/exe")
	}
	if !errors.Is(err, unix.EROFS) {
		t.Errorf("reopen for writing: %v, want EROFS", err)
	}
	// The host's own view is untouched (the bind never propagated).
	h, err := os.OpenFile(bin, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("host view of the binary: %v", err)
	}
	h.Close()
	got, err := os.ReadFile(bin)
	if err != nil || !bytes.Equal(got, src) {
		t.Errorf("binary changed: %v", err)
	}
}
