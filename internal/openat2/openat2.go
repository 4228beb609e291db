// Package openat2 is openat2(2) as the kernel asks callers to use it: with
// RESOLVE_IN_ROOT or RESOLVE_BENEATH the call fails with EAGAIN when a
// rename or a mount anywhere on the host raced the lookup, and the caller
// should try again. On a busy host that happens; a resolution that failed
// once with EAGAIN was seen to fail a layer's unpacking under load.
package openat2

import (
	"errors"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// attempts bounds the retries: the race needs a concurrent rename or mount
// each time, so a handful suffices and a loop never spins forever.
const attempts = 64

// Open is unix.Openat2, tried again while it fails with EAGAIN or EINTR.
func Open(dirfd int, path string, how *unix.OpenHow) (int, error) {
	var err error
	for range attempts {
		var fd int
		fd, err = unix.Openat2(dirfd, path, how)
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return -1, err
		}
	}
	return -1, err
}

// Rmdir removes the empty directory path through its parent opened without
// following any symbolic link (RESOLVE_NO_SYMLINKS: a link on the way fails
// with ELOOP). It never removes anything but an empty directory: a cgroup
// with a process or a child is refused by the kernel (EBUSY).
func Rmdir(path string) error {
	parent, name := filepath.Dir(path), filepath.Base(path)
	fd, err := Open(unix.AT_FDCWD, parent, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return &fs.PathError{Op: "open", Path: parent, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil {
		return &fs.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}
