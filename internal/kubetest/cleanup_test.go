package kubetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestReferencesChain: the sweep removes rules in the host's chains that
// jump to a cluster chain, and no other rule.
func TestReferencesChain(t *testing.T) {
	for _, tc := range []struct {
		rule string
		want bool
	}{
		{`-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`, true},
		{`-A POSTROUTING -s 10.245.0.2/32 -g CNI-abc`, true},
		{`-A INPUT -i lo -j ACCEPT`, false},
		{`-A FORWARD -m comment --comment "-j KUBE-X in a comment" -j ACCEPT`, false},
		{`-A OUTPUT -j SANDLOT-EGRESS`, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := referencesChain(strings.Fields(tc.rule)); got != tc.want {
				t.Errorf("referencesChain = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/var/lib/x`:          "/var/lib/x",
		`/var/lib/a\040b`:     "/var/lib/a b",
		`/var/lib/tab\011end`: "/var/lib/tab\tend",
		`/trailing\04`:        `/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRemoveDirUnmountsLate: a mount under the cluster's dir that appeared
// after the sweep (the kubelet's or a shim's, made as it ended) no longer
// fails the removal with EBUSY; os.RemoveAll alone failed on it.
func TestRemoveDirUnmountsLate(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (mounts a tmpfs)")
	dir := filepath.Join(t.TempDir(), "c")
	root := filepath.Join(dir, "kubelet", "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	if err := os.RemoveAll(dir); err == nil {
		t.Fatal("os.RemoveAll removed a directory with a mount under it; the test cannot tell removeDir's work")
	}
	if err := removeDir(dir, 10*time.Second); err != nil {
		t.Fatalf("removeDir: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", dir, err)
	}
}
