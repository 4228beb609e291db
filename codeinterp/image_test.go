package codeinterp_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/codeinterp"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// TestImageHasInterpreters checks that the image holds what the agent's
// kernels start (Rscript, java with the JDK's jshell module, python3,
// node, bash) at the paths the agent looks for them; symlinks (java's go
// through /etc/alternatives) resolve inside the image, as in a sandbox.
func TestImageHasInterpreters(t *testing.T) {
	_, img := debiantest.Image(t, codeinterp.ImageConfig(), codeinterp.Template)
	lowers := img.LowerDirs()
	if len(lowers) != 1 {
		t.Fatalf("layers = %d, want 1", len(lowers))
	}
	root, err := os.Open(lowers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, p := range []string{"usr/bin/Rscript", "usr/bin/java", "usr/bin/python3", "usr/bin/node", "bin/bash", "usr/share/man/man1"} {
		fd, err := unix.Openat2(int(root.Fd()), p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		unix.Close(fd)
	}
	if jdks, _ := filepath.Glob(filepath.Join(lowers[0], "usr/lib/jvm/*/jmods/jdk.jshell.jmod")); len(jdks) == 0 {
		if mods, _ := filepath.Glob(filepath.Join(lowers[0], "usr/lib/jvm/*/bin/jshell")); len(mods) == 0 {
			t.Error("no JDK with jshell under /usr/lib/jvm")
		}
	}
}
