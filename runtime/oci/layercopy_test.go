package oci

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// layerTmpfs mounts a small tmpfs, as a sandbox's writable layer is, and
// returns its path.
func layerTmpfs(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64m,mode=0711"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestCopyLayerHostile: the writable layer a suspend moves to disk and
// back is the sandbox's. Its symlinks (absolute, relative, to a file, to a
// directory) are copied as symlinks: the copy neither reads a host file
// into the layer nor writes outside the copy. FIFOs are not opened (the
// copy would hang), a sparse file of 1 TiB costs its data only, a device
// other than a whiteout is refused; whiteouts, opaque marks, owners,
// set-id modes, xattrs, times and hard links come through exactly.
func TestCopyLayerHostile(t *testing.T) {
	outside := t.TempDir()
	secret := []byte("host secret\n")
	if err := os.WriteFile(filepath.Join(outside, "secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(layerTmpfs(t), "upper")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(src, 0o755))
	must(os.Symlink(outside, filepath.Join(src, "outdir")))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "outfile")))
	must(os.Symlink("../../../../../../.."+outside, filepath.Join(src, "relout")))
	must(os.Mkdir(filepath.Join(src, "opaque"), 0o755))
	must(unix.Setxattr(filepath.Join(src, "opaque"), "trusted.overlay.opaque", []byte("y"), 0))
	must(unix.Mknod(filepath.Join(src, "opaque", "deleted"), unix.S_IFCHR|0o600, 0))
	must(unix.Mkfifo(filepath.Join(src, "fifo"), 0o644))
	must(os.WriteFile(filepath.Join(src, "suid"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Chown(filepath.Join(src, "suid"), 100000, 100000))
	must(os.Chmod(filepath.Join(src, "suid"), os.ModeSetuid|0o755))
	must(unix.Setxattr(filepath.Join(src, "suid"), "user.note", []byte("kept"), 0))
	must(os.Link(filepath.Join(src, "suid"), filepath.Join(src, "suid-link")))
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(filepath.Join(src, "suid"), mtime, mtime))
	sparse, err := os.Create(filepath.Join(src, "sparse"))
	must(err)
	_, err = sparse.WriteAt([]byte("end"), 1<<40-3)
	must(err)
	must(sparse.Close())

	dst := filepath.Join(t.TempDir(), "layer")
	done := make(chan error, 1)
	go func() { done <- copyLayer(src, dst, defaultLayerLimits) }()
	select {
	case err := <-done:
		must(err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the copy hangs (it opened the FIFO)")
	}

	// Nothing was read from or written to the host outside the copy.
	ents, err := os.ReadDir(outside)
	must(err)
	if len(ents) != 1 {
		t.Errorf("the host dir the layer points at has %d entries after the copy, want 1", len(ents))
	}
	for _, name := range []string{"outdir", "outfile", "relout"} {
		fi, err := os.Lstat(filepath.Join(dst, name))
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s in the copy: %v %v, want a symlink", name, fi, err)
		}
	}
	must(filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || filepath.Base(p) == "sparse" {
			return err
		}
		b, err := os.ReadFile(p)
		if bytes.Contains(b, secret) {
			t.Errorf("%s in the copy holds the host's secret", p)
		}
		return err
	}))

	var st unix.Stat_t
	must(unix.Lstat(filepath.Join(dst, "opaque", "deleted"), &st))
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("whiteout: mode %#o rdev %d, want a char device 0/0", st.Mode, st.Rdev)
	}
	v := make([]byte, 8)
	n, err := unix.Getxattr(filepath.Join(dst, "opaque"), "trusted.overlay.opaque", v)
	if err != nil || string(v[:n]) != "y" {
		t.Errorf("opaque mark: %q %v", v[:n], err)
	}
	must(unix.Lstat(filepath.Join(dst, "fifo"), &st))
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Errorf("fifo: mode %#o", st.Mode)
	}
	var a, b unix.Stat_t
	must(unix.Lstat(filepath.Join(dst, "suid"), &a))
	must(unix.Lstat(filepath.Join(dst, "suid-link"), &b))
	if a.Uid != 100000 || a.Gid != 100000 || a.Mode&0o7777 != 0o4755 || a.Ino != b.Ino || a.Mtim.Sec != mtime.Unix() {
		t.Errorf("suid: uid %d gid %d mode %#o ino %d/%d mtime %d, want 100000 100000 04755, one inode, %d", a.Uid, a.Gid, a.Mode&0o7777, a.Ino, b.Ino, a.Mtim.Sec, mtime.Unix())
	}
	if n, err := unix.Getxattr(filepath.Join(dst, "suid"), "user.note", v); err != nil || string(v[:n]) != "kept" {
		t.Errorf("user xattr: %q %v", v[:n], err)
	}
	must(unix.Lstat(filepath.Join(dst, "sparse"), &st))
	if st.Size != 1<<40 || st.Blocks*512 > 1<<20 {
		t.Errorf("sparse: size %d, %d bytes on disk, want 1 TiB in under 1 MiB", st.Size, st.Blocks*512)
	}

	// A copy lands only in a directory it makes: over an earlier one (its
	// symlink pointing out) it is refused, and writes nothing through it.
	stale := filepath.Join(t.TempDir(), "layer")
	must(os.Mkdir(stale, 0o700))
	must(os.Symlink(outside, filepath.Join(stale, "opaque")))
	if err := copyLayer(src, stale, defaultLayerLimits); err == nil {
		t.Error("a copy over an existing directory was not refused")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("the host dir has %d entries after a copy over a stale one, want 1", len(ents))
	}

	// A device is no layer's: refused, not made.
	must(unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	err = copyLayer(src, filepath.Join(t.TempDir(), "layer"), defaultLayerLimits)
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a layer with a device: %v, want invalid_argument", err)
	}
	must(os.Remove(filepath.Join(src, "null")))
	// Bounds: entries, depth, data, hard links' paths.
	for name, lim := range map[string]layerLimits{
		"entries": {Entries: 3, Depth: 512, DataBytes: 1 << 30, LinkBytes: 1 << 20},
		"depth":   {Entries: 1 << 20, Depth: 1, DataBytes: 1 << 30, LinkBytes: 1 << 20},
		"data":    {Entries: 1 << 20, Depth: 512, DataBytes: 8, LinkBytes: 1 << 20},
		"links":   {Entries: 1 << 20, Depth: 512, DataBytes: 1 << 30, LinkBytes: 2},
	} {
		err := copyLayer(src, filepath.Join(t.TempDir(), "layer"), lim)
		if !errors.Is(err, errdefs.ErrResourceExhausted) {
			t.Errorf("past %s: %v, want resource_exhausted", name, err)
		}
	}
}
