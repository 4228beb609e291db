package deb

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWalls attacks what the package leaves on a host, in a fresh Debian
// root with the package installed:
//   - another user reads neither the config file (it may hold a store URL
//     with a password, or TLS paths) nor the state (the store, the key
//     files);
//   - purge does not delete through a mount under /var/lib/sandlot into
//     what the mount shows (a directory of the host bound there by hand,
//     or left by a daemon that was killed): it refuses, and purges once
//     the mount is gone.
func TestWalls(t *testing.T) {
	requireRoot(t)
	for _, b := range []string{"unshare", "chroot", "tar", "git"} {
		requireBinary(t, b)
	}
	root := newRoot(t, baseRoot(t))
	pkg := buildPackage(t, moduleRoot(t), currentVersion, "0000000000000000000000000000000000000000")
	if err := os.WriteFile(filepath.Join(root, "tmp/sandlot.deb"), mustRead(t, pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	inRoot(t, root, "dpkg -i /tmp/sandlot.deb")

	t.Run("another user reads no config or state", func(t *testing.T) {
		for _, p := range []string{ConfigFile, StateDir + "/api-key", StateDir + "/sandlot.db", StateDir} {
			out, err := inRootErr(root, "setpriv --reuid=65534 --regid=65534 --clear-groups -- ls -l "+p+" >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups -- head -c1 "+p)
			if err == nil {
				t.Errorf("user nobody read %s: %q", p, out)
			}
		}
	})

	t.Run("purge does not delete through a mount", func(t *testing.T) {
		out, err := inRootErr(root, `mkdir -p /srv/canary /var/lib/sandlot/images
echo keep > /srv/canary/keep
mount --bind /srv/canary /var/lib/sandlot/images
dpkg --purge sandlot`)
		if err == nil {
			t.Errorf("purge went ahead with a mount under %s:\n%s", StateDir, out)
		}
		if b, err := os.ReadFile(filepath.Join(root, "srv/canary/keep")); err != nil || string(b) != "keep\n" {
			t.Fatalf("purge deleted what the mount showed: %v", err)
		}
		if !strings.Contains(out, "unmount them and purge again") {
			t.Errorf("purge did not say why it refused:\n%s", out)
		}
		// The mount ended with inRoot's namespace: purge again.
		inRoot(t, root, "dpkg --purge sandlot")
		if _, err := os.Lstat(filepath.Join(root, StateDir)); err == nil {
			t.Errorf("purge left %s once nothing was mounted there", StateDir)
		}
		if b, err := exec.Command("cat", filepath.Join(root, "srv/canary/keep")).Output(); err != nil || string(b) != "keep\n" {
			t.Errorf("the canary is gone: %v", err)
		}
	})
}
