// Package openat2 is openat2(2) as the kernel asks callers to use it: with
// RESOLVE_IN_ROOT or RESOLVE_BENEATH the call fails with EAGAIN when a
// rename or a mount anywhere on the host raced the lookup, and the caller
// should try again. On a busy host that happens; a resolution that failed
// once with EAGAIN was seen to fail a layer's unpacking under load.
package openat2

import (
	"errors"

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
