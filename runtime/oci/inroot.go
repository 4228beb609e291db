package oci

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/openat2"
)

// dirInRoot reports whether name is a directory inside root, resolved as
// the sandbox would (symlinks stay inside root).
func dirInRoot(root, name string) bool {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(rfd)
	fd, err := openat2.Open(rfd, strings.TrimPrefix(name, "/"), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
