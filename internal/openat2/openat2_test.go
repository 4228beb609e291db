package openat2

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpen: a path inside the root opens, a symlink climbing out of it is
// clamped to the root, and an error other than EAGAIN is returned at once.
func TestOpen(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../..", filepath.Join(root, "a/up")); err != nil {
		t.Fatal(err)
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT}
	fd, err := Open(rfd, "a/b", how)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	fd, err = Open(rfd, "a/up/a/b", how)
	if err != nil {
		t.Fatalf("a climbing symlink is clamped to the root: %v", err)
	}
	unix.Close(fd)
	if _, err := Open(rfd, "missing", how); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("missing: %v", err)
	}
}

// TestRmdir: an empty directory goes; one with an entry, and one reached
// through a symbolic link, stay.
func TestRmdir(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"real/empty", "real/full/child", "real/linked"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("real", filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	if err := Rmdir(filepath.Join(root, "real/empty")); err != nil {
		t.Errorf("rmdir of an empty directory: %v", err)
	}
	if err := Rmdir(filepath.Join(root, "real/full")); !errors.Is(err, unix.ENOTEMPTY) {
		t.Errorf("rmdir of a full directory = %v, want ENOTEMPTY", err)
	}
	if err := Rmdir(filepath.Join(root, "alias/linked")); !errors.Is(err, unix.ELOOP) {
		t.Errorf("rmdir through a link = %v, want ELOOP", err)
	}
	for _, d := range []string{"real/full/child", "real/linked"} {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "real/empty")); err == nil {
		t.Error("real/empty is still there")
	}
}
