package daemonimage_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/sandlot/sandlot/image/daemonimage"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// TestBaseHasWhatTheDaemonRuns builds the daemon image's real Debian base
// (once per machine, in the tests' shared store) and runs, inside its
// tree, each program Packages is there for: a package list that lost one
// fails here, not on an operator's host.
func TestBaseHasWhatTheDaemonRuns(t *testing.T) {
	_, img := debiantest.Image(t, daemonimage.BaseConfig(), "sandlot-daemon-base")
	if len(img.Layers) != 1 {
		t.Fatalf("%d layers, want mmdebstrap's one", len(img.Layers))
	}
	root := img.Layers[0].Dir
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"crun", []string{"crun", "--version"}},
		{"runc", []string{"runc", "--version"}},
		{"nftables", []string{"nft", "--version"}},
		{"iproute2", []string{"ip", "-V"}},
		{"mmdebstrap", []string{"mmdebstrap", "--version"}},
		{"gpg", []string{"gpg", "--version"}},
		{"unshare", []string{"unshare", "--version"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// chroot only reads the tree: these print their versions. crun
			// re-executes itself through /proc, mounted in a mount
			// namespace of the command's own (gone when it exits).
			script := `mount -t proc proc "$0/proc" && exec chroot "$0" "$@"`
			out, err := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", script, root}, tc.args...)...).CombinedOutput()
			if err != nil {
				t.Errorf("%v in the daemon base: %v\n%s", tc.args, err, out)
			}
		})
	}
	for _, f := range []string{"etc/ssl/certs/ca-certificates.crt", "usr/share/keyrings/debian-archive-keyring.gpg", "usr/share/perl5/Dpkg.pm"} {
		if _, err := os.Stat(root + "/" + f); err != nil {
			t.Errorf("the daemon base lacks /%s: %v", f, err)
		}
	}
}
