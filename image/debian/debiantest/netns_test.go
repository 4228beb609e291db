package debiantest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestInNetns: the wrapper runs its mmdebstrap in the namespace it names
// (here a process's own fresh one), with its arguments as they came.
func TestInNetns(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "unshare")
	testenv.RequireBinary(t, "nsenter")
	holder := exec.Command("unshare", "--net", "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	ns := fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid)
	var want string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		want, _ = os.Readlink(ns)
		own, _ := os.Readlink("/proc/self/ns/net")
		if want != "" && want != own {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unshare's namespace: %q (ours %q)", want, own)
		}
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "mmdebstrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nreadlink /proc/self/ns/net\nprintf '%s|' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper, err := inNetns(dir, ns, fake)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(wrapper, "a b", "--c").CombinedOutput()
	if got := string(out); err != nil || got != want+"\na b|--c|" {
		t.Fatalf("wrapper: %q, %v; want the namespace %s and the arguments", got, err, want)
	}
	if _, err := inNetns(dir, "/proc/1/ns/net; rm -rf /", fake); err == nil || !strings.Contains(err.Error(), "plain path") {
		t.Errorf("a namespace path with a shell line in it: %v", err)
	}
}
