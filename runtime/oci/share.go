package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The share is a tmpfs that holds what sandboxes mount read-only from the
// host: the root skeleton (rootfs/<digest>) and the agent binary. A
// sandbox's mount table shows each bind mount's source as a path inside its
// file system; on a file system of its own that path names nothing of the
// host ("/rootfs/<digest>" rather than "/run/sandlot/rootfs/<digest>").
//
// It is one per host, not per state dir: everything in it is named by its
// content, so every daemon (and every test) can use it, and a state dir
// stays a plain directory that can be removed like any other. It is mounted
// by the first process that needs it after boot and stays mounted; a file
// removed from it lives on in the sandboxes that mount it.
const (
	DefaultShareDir = "/run/sandlot-share"
	shareSize       = 512 << 20
)

// mountShare makes sure dir is the share's tmpfs.
func mountShare(dir string) error {
	err := withLock(dir+".lock", func() error {
		if isMountPoint(dir) {
			return nil
		}
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return err
		}
		return unix.Mount("sandlot-share", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0711", shareSize))
	})
	if err != nil {
		return fmt.Errorf("share %s: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether dir is the root of a mount.
func isMountPoint(dir string) bool {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return false
	}
	return st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// withLock runs fn holding an exclusive flock on the file at path, which
// serializes the processes that use it.
func withLock(path string, fn func() error) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	return fn()
}

// Purge removes a state dir, first unmounting the runsc channel
// directories and the image roots (in the default share) its sandboxes
// left (Delete unmounts each sandbox's own) and freeing the host id ranges
// it holds. For
// tests and uninstalls; every sandbox in it should have been deleted.
func Purge(stateDir string) error {
	mounts, _ := filepath.Glob(filepath.Join(stateDir, "chan", "*"))
	bundles, _ := os.ReadDir(filepath.Join(stateDir, "bundles"))
	for _, b := range bundles {
		d := filepath.Join(DefaultShareDir, "roots", b.Name())
		mounts = append(mounts, filepath.Join(d, "root"), d)
	}
	var errs []error
	for _, d := range mounts {
		if err := unix.Unmount(d, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", d, err))
		}
	}
	for _, b := range bundles {
		os.Remove(filepath.Join(DefaultShareDir, "roots", b.Name()))
		os.Remove(filepath.Join(DefaultShareDir, "null", b.Name()))
	}
	if abs, err := stateName(stateDir); err == nil {
		if err := freeState(filepath.Join(DefaultShareDir, idsDir), abs); err != nil {
			errs = append(errs, fmt.Errorf("id ranges: %w", err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return os.RemoveAll(stateDir)
}

// sandboxShareFiles are the share's files of one sandbox, by directory and
// name prefix: its CA bundle (resolv.conf files are shared and tiny; they
// stay) and its boot and machine ids.
var sandboxShareFiles = []struct{ dir, prefix string }{
	{netFilesDir, caFilePrefix},
	{identityDir, ""},
}

// removeShareFiles removes the share's files of one sandbox
// (sandboxShareFiles) that a deleted bundle's config mounted.
func (r *Runtime) removeShareFiles(mounts []specs.Mount) {
	for _, m := range mounts {
		for _, f := range sandboxShareFiles {
			rest, ok := strings.CutPrefix(m.Source, filepath.Join(r.share, f.dir)+"/")
			if !ok || rest == "" || !strings.HasPrefix(rest, f.prefix) || strings.Contains(rest, "/") {
				continue
			}
			if err := os.Remove(m.Source); err != nil && !errors.Is(err, fs.ErrNotExist) {
				r.log.Warn("remove share files", "path", m.Source, "err", err)
			}
		}
	}
}
