package server

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// mkdirAll is os.MkdirAll(dir, 0755) that gives every directory it
// creates to s.owner (Config.Sudo), as E2B's envd does for the parents of a
// file it writes. A directory swapped for a symlink between its creation
// and its chown keeps root's owner: Lchown never follows.
func (s *Server) mkdirAll(dir string) error {
	if s.owner == nil {
		return os.MkdirAll(dir, 0o755)
	}
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	p := "/"
	if !filepath.IsAbs(dir) {
		p = ""
	}
	for _, c := range strings.Split(strings.Trim(dir, "/"), "/") {
		p = filepath.Join(p, c)
		err := os.Mkdir(p, 0o755)
		switch {
		case err == nil:
			if err := os.Lchown(p, s.owner.uid, s.owner.gid); err != nil {
				return err
			}
		case !errors.Is(err, fs.ErrExist):
			return err
		}
	}
	return nil
}

// checkWritten vets the file a write opened (plainFile) and gives it to
// s.owner when the write created it. A file that existed keeps its owner.
func (s *Server) checkWritten(path string, f *os.File, created bool) error {
	fi, err := f.Stat()
	if err != nil {
		return fsErr("write", path, err)
	}
	if err := plainFile("write", path, f, fi); err != nil {
		return err
	}
	if created && s.owner != nil {
		if err := f.Chown(s.owner.uid, s.owner.gid); err != nil {
			return fsErr("write", path, err)
		}
	}
	return nil
}

// plainFile refuses what a file call must not read or write, wherever the
// path (or a symlink the sandbox's code planted on it) led: anything but a
// regular file (a pipe of the agent's through /proc/self/fd, a FIFO, a
// device), and the kernel's files in /proc and /sys, where /proc/self is
// the agent itself (its memory, its descriptors). Commands read those.
func plainFile(op, path string, f *os.File, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return errf(errdefs.CodeFailedPrecondition, "%s %s: not a regular file", op, path)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fsErr(op, path, err)
	}
	var st unix.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil {
		return fsErr(op, path, err)
	}
	if serr != nil {
		return fsErr(op, path, serr)
	}
	switch st.Type {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC:
		return errf(errdefs.CodePermissionDenied, "%s %s: file calls do not read or write /proc or /sys (a command can)", op, path)
	}
	return nil
}

// keepOwner gives a copy the owner of its original when the copy was made
// as root (a move across file systems): a move changes no owner.
func keepOwner(to string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || unix.Geteuid() != 0 {
		return nil
	}
	return os.Lchown(to, int(st.Uid), int(st.Gid))
}
