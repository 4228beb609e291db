package oci

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/openat2"
	"github.com/sandlot/sandlot/runtime"
)

// Volumes go into an image root after the overlay is mounted and before
// the runtime starts: each is a clone of the volume's file system,
// id-mapped with the sandbox's user namespace (the volume's uid n is the
// sandbox's uid n, whichever sandbox, as for image layers), nosuid and
// nodev, read-only when asked, attached at its path in the overlay. The
// runtime bind-mounts the root recursively, so the sandbox's mount
// namespace gets the volume as a mount it did not make: its user
// namespace cannot unmount it to see what is under it, nor remount a
// read-only one writable (the kernel locks the flags of mounts a less
// privileged namespace inherits).
//
// The mount point is made inside the root with openat2 RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS and RESOLVE_NO_XDEV one component at a time: a
// template whose tree has a symlink (or a file, or another mount) where
// the path goes is refused, so a volume never lands outside the root or
// on a file of the host's.

// attachVolumes mounts vols into the root at rootfs of a sandbox with
// ids. On failure what it attached stays under the root, which the
// caller unmounts (MNT_DETACH takes the volumes with it).
func attachVolumes(rootfs string, vols []runtime.Volume, ids IDRange) error {
	if len(vols) == 0 {
		return nil
	}
	userns, err := usernses.get(ids)
	if err != nil {
		return err
	}
	root, err := unix.Open(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("volumes: root: %w", err)
	}
	defer unix.Close(root)
	for _, v := range vols {
		if err := attachVolume(root, v, ids, userns); err != nil {
			return fmt.Errorf("volume at %s: %w", v.Path, err)
		}
	}
	return nil
}

func attachVolume(root int, v runtime.Volume, ids IDRange, userns int) error {
	target, err := mountPoint(root, v.Path, ids)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	clone, err := unix.OpenTree(v.FD, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(clone)
	attrs := uint64(unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if v.ReadOnly {
		attrs |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(clone, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: attrs, Userns_fd: uint64(userns)}); err != nil {
		return fmt.Errorf("id-mapped mount: %w", err)
	}
	if err := unix.MoveMount(clone, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return nil
}

// mountPoint returns an O_PATH descriptor of the directory p (absolute)
// under root, making the missing ones (0755, the sandbox root's). A
// symlink, a non-directory or a mount on the way is invalid_argument.
func mountPoint(root int, p string, ids IDRange) (int, error) {
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	dir, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if c == "" || c == "." || c == ".." {
			unix.Close(dir)
			return -1, fmt.Errorf("mount path %q is not clean: %w", p, errdefs.ErrInvalidArgument)
		}
		next, err := openat2.Open(dir, c, how)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(dir, c, 0o755); err == nil {
				err = unix.Fchownat(dir, c, int(ids.Host(0)), int(ids.Host(0)), unix.AT_SYMLINK_NOFOLLOW)
			}
			if err == nil {
				next, err = openat2.Open(dir, c, how)
			}
		}
		unix.Close(dir)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
				return -1, errdefs.Sentence(errdefs.ErrInvalidArgument, "volume mount path %q crosses a symlink, a file or a mount of the template at %q", p, c)
			}
			return -1, fmt.Errorf("mount point %s: %w", p, err)
		}
		dir = next
	}
	return dir, nil
}

// checkVolumes refuses volumes where they are not mounted: on the host
// template (no root of the sandbox's own to mount them in) and under
// runsc, whose gofer serves the root and has not been shown to serve a
// mount under it.
func (r *Runtime) checkVolumes(spec runtime.Spec) error {
	if len(spec.Volumes) == 0 {
		return nil
	}
	if spec.Root == nil {
		return errdefs.Sentence(errdefs.ErrFailedPrecondition, "volumes are mounted only in sandboxes of image templates, not the host template")
	}
	if r.kind == KindRunsc {
		return errdefs.Sentence(errdefs.ErrFailedPrecondition, "volumes are not supported on runsc yet")
	}
	return nil
}
