package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestThisHost runs every check on this machine, with the real probes:
// the development and CI hosts run sandlot, so every required check
// passes here.
func TestThisHost(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireOCIRuntime(t)
	rep := Run(context.Background(), Config{DataDir: t.TempDir()})
	var text strings.Builder
	rep.WriteText(&text)
	if !rep.OK {
		t.Fatalf("a required check failed on this host:\n%s", text.String())
	}
	for _, name := range []string{"kernel", "user namespaces", "cgroups", "overlayfs", "seccomp", "nftables", "disk", "store"} {
		if c := find(rep, name); c.Status != OK {
			t.Errorf("%s: %s (%s)", name, c.Status, c.Detail)
		}
	}
	for _, rt := range []string{"crun", "runc"} {
		if c := find(rep, "runtime "+rt); c.Status != OK || !strings.Contains(c.Detail, "version") {
			t.Errorf("runtime %s: %s (%s), want its version", rt, c.Status, c.Detail)
		}
	}
	t.Logf("\n%s", text.String())
}

// TestSmallDataDir: a data dir on a file system smaller than the store
// and the images need fails the disk check, and so does a full one,
// which cannot take a file at all.
func TestSmallDataDir(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("doctor", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	h := newFakeHost(t)
	cfg := h.config(t)
	cfg.DataDir = dir
	rep := Run(context.Background(), cfg)
	if c := find(rep, "disk"); c.Status != Fail || rep.OK || !strings.Contains(c.Detail, "under the 1.0 GiB") {
		t.Fatalf("1 MiB data dir: disk %s (%s), report ok %v; want a failure naming the 1 GiB", c.Status, c.Detail, rep.OK)
	}
	// Fill it: then not even the probe's file fits.
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	f.Close()
	cfg.MinFreeBytes = 1 // only the write can fail now
	rep = Run(context.Background(), cfg)
	if c := find(rep, "disk"); c.Status != Fail || rep.OK || !strings.Contains(c.Detail, "cannot write there") {
		t.Fatalf("full data dir: disk %s (%s), report ok %v; want cannot write", c.Status, c.Detail, rep.OK)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the probe left files behind: %v", ents)
	}
}
