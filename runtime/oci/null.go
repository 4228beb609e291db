package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A sandbox's init gets /dev/null-like stdio from the runtime binary that
// starts it, and crun (1.8.1) fchowns its stdio to the init's user so the
// init can reopen them: given the host's /dev/null it hands the host's
// /dev/null to the sandbox's host uid. So each sandbox gets a null device
// node of its own, <share>/null/<id>, in a small tmpfs mounted once per
// boot without nodev (/run is often nodev, and so is the share); the
// runtime may chown it at will, and Delete removes it. Sandbox ids are
// random, so daemons with other state dirs share the dir without meeting,
// and a state dir stays a plain directory.

func (r *Runtime) nullDir() string           { return filepath.Join(r.share, "null") }
func (r *Runtime) nullPath(id string) string { return filepath.Join(r.nullDir(), id) }

// prepareNull mounts <share>/null (once per boot).
func prepareNull(share string) error {
	dir := filepath.Join(share, "null")
	return withLock(dir+".lock", func() error {
		if isMountPoint(dir) {
			return nil
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := unix.Mount("sandlot-null", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,nr_inodes=1048576,mode=0700"); err != nil {
			return fmt.Errorf("null dir: %w", err)
		}
		return nil
	})
}

// openNull makes sandbox id's null device and opens it.
func (r *Runtime) openNull(id string) (*os.File, error) {
	p := r.nullPath(id)
	if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("null device: %w", err)
	}
	return os.OpenFile(p, os.O_RDWR, 0)
}

// removeNull removes sandbox id's null device, if any.
func (r *Runtime) removeNull(id string) error {
	if err := os.Remove(r.nullPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("null device: %w", err)
	}
	return nil
}
