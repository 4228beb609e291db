package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// A sandbox whose Spec has a Root runs on an overlayfs made by the daemon,
// whatever the OCI runtime, and handed to it as a plain root path:
//
//	<share>/roots/<id>/  a tmpfs of Limits.DiskBytes, 0711 (Root.Sudo: 0700, the sandbox root's): the sandbox's writable layer
//	  upper/ work/       overlayfs's upper and work dirs
//	  root/              the overlay: the sandbox's root (config.json's root.path)
//
// The lower layers are, top first, the image skeleton from the share
// (mount points, /etc/hosts, /etc/hostname) and the image's layer trees.
// Each is an id-mapped clone (userns.go) with the sandbox's mapping, given
// to overlayfs by file descriptor (fsconfig "lowerdir+", Linux 6.13), so a
// layer file of uid n is uid n inside the sandbox and the store's trees
// stay as they are, shared by every sandbox. What the sandbox writes lands
// in upper/ with host ids of its range. The tmpfs bounds the writable
// layer (ENOSPC past Limits.DiskBytes) and charges its pages to the
// writer's memory cgroup, like the host template's /home/user and /tmp.
//
// The roots live in the share, not the state dir: crun and runc resolve
// the root path as the sandbox's root user (a host id of its range), who
// can search the share (0711) but not a state dir inside a private data
// dir. Sandbox ids are random, so daemons with different state dirs share
// roots/ without meeting. roots/ is a shared mount of itself, so the
// overlays mounted under it also appear in crun's launcher namespace
// (mountns.go), which made its copy of the host's mounts earlier.

// imageSkelDirs are the mount points the runtime needs in any image; they
// come from a shared layer on top of the image so the sandbox's upper
// layer starts empty.
var imageSkelDirs = []string{"proc", "dev", "sys", "run", "run/sandlot", "opt", "opt/sandlot", "etc"}

// newImageSkeleton describes the top layer of every image root.
func newImageSkeleton() *skeleton {
	s := &skeleton{}
	for _, d := range imageSkelDirs {
		s.dir(d, 0o755, 0)
	}
	s.file(AgentPath[1:], "", 0o555)
	s.file("etc/hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n", 0o644)
	s.file("etc/hostname", "sandbox\n", 0o644)
	s.file("etc/resolv.conf", NoNetworkResolvConf, 0o644)
	s.file("etc/machine-id", "", 0o444) // the mount point of the sandbox's own (identity.go)
	return s
}

// usernses is process-wide: one user namespace per id range base.
var usernses usernsCache

func (r *Runtime) rootsDir() string         { return filepath.Join(r.share, "roots") }
func (r *Runtime) rootDir(id string) string { return filepath.Join(r.rootsDir(), id) }

// prepareRoots makes <share>/roots a shared mount of itself (once).
func prepareRoots(share string) error {
	dir := filepath.Join(share, "roots")
	return withLock(dir+".lock", func() error {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return err
		}
		if !isMountPoint(dir) {
			if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("roots dir: bind: %w", err)
			}
		}
		if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
			return fmt.Errorf("roots dir: make shared: %w", err)
		}
		return nil
	})
}

// mountImageRoot mounts sandbox id's root (see above) and returns its path.
// On failure nothing is left mounted.
func (r *Runtime) mountImageRoot(id string, root *runtime.Root, ids IDRange, diskBytes int64, ph *phases) (_ string, err error) {
	if len(root.Layers) == 0 {
		return "", fmt.Errorf("image root of %s: no layers: %w", id, errdefs.ErrInvalidArgument)
	}
	dir := r.rootDir(id)
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("image root: %w", err)
	}
	defer func() {
		if err != nil {
			r.unmountImageRoot(id)
		}
	}()
	if err := mountLayerTmpfs(dir, diskBytes, root.Sudo, ids); err != nil {
		return "", err
	}
	ph.mark("tmpfs")
	upper, work, merged := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "root")
	mkdirs := []string{upper, work, merged}
	if root.Upper != "" {
		// The caller's writable layer (a build step's); the tmpfs only
		// holds the mount point.
		if root.Work == "" {
			return "", fmt.Errorf("image root of %s: Upper without Work: %w", id, errdefs.ErrInvalidArgument)
		}
		upper, work, mkdirs = root.Upper, root.Work, []string{merged}
	}
	for _, d := range mkdirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("image root: %w", err)
		}
	}
	// The root directory itself belongs to the sandbox's root.
	if err := os.Chown(upper, int(ids.Host(0)), int(ids.Host(0))); err != nil {
		return "", fmt.Errorf("image root: %w", err)
	}
	userns, err := usernses.get(ids)
	if err != nil {
		return "", err
	}
	ph.mark("userns")
	lowers := append([]string{r.imageSkel}, root.Layers...)
	if err := mountOverlay(merged, lowers, upper, work, userns, root.Sudo); err != nil {
		return "", fmt.Errorf("image root of %s: %w", id, err)
	}
	ph.mark("overlay")
	if root.Upper != "" {
		return merged, nil // the caller's layer gets only what runs inside writes
	}
	if err := ensureHome(merged, ids); err != nil {
		return "", fmt.Errorf("image root of %s: %w", id, err)
	}
	ph.mark("home")
	if root.Sudo {
		if err := setuidSudo(merged, ids); err != nil {
			return "", fmt.Errorf("image root of %s: %w", id, err)
		}
		ph.mark("sudo")
	}
	return merged, nil
}

// mountLayerTmpfs mounts at dir the tmpfs that holds a sandbox's writable
// layer: diskBytes large, searchable by all, or (sudo) reachable by the
// sandbox's root only.
func mountLayerTmpfs(dir string, diskBytes int64, sudo bool, ids IDRange) error {
	opts := fmt.Sprintf("size=%d,mode=0711", diskBytes)
	if sudo {
		// The overlay below it honours set-id bits: only the sandbox's
		// root (who resolves the root path) may reach it, no host account.
		opts = fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", diskBytes, ids.Host(0), ids.Host(0))
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("image root: writable layer: %w", err)
	}
	return nil
}

// SudoPath is the file Root.Sudo gives its setuid bit back.
const SudoPath = "/usr/bin/sudo"

// setuidSudo gives the image's sudo back the setuid bit the image store
// strips (image/layer): the chmod copies it up into the sandbox's writable
// layer, where it belongs to the sandbox's root (a host id of its range,
// on a tmpfs only that id can search), so no set-id file of host root's
// exists anywhere. Only a regular file of the sandbox's root qualifies;
// the tree is looked at through os.Root, and nothing runs inside yet.
func setuidSudo(merged string, ids IDRange) error {
	root, err := os.OpenRoot(merged)
	if err != nil {
		return err
	}
	defer root.Close()
	rel := SudoPath[1:]
	fi, err := root.Lstat(rel)
	if err != nil {
		return fmt.Errorf("sudo: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok || st.Uid != ids.Host(0) {
		return fmt.Errorf("sudo: %s is not a regular file of the sandbox's root: %w", SudoPath, errdefs.ErrInvalidArgument)
	}
	return root.Chmod(rel, fi.Mode().Perm()&0o755|fs.ModeSetuid)
}

// mountOverlay mounts at target an overlay of id-mapped clones of lowers
// (top first) under upper. redirect_dir, index and metacopy are off: the
// upper dir stays a plain tree (whole files, whiteouts, opaque dirs) that
// layer.Diff can read, and renaming a lower directory fails with EXDEV,
// which tools answer by copying.
func mountOverlay(target string, lowers []string, upper, work string, userns int, suid bool) error {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("overlayfs: %w", err)
	}
	defer unix.Close(fsfd)
	for _, l := range lowers {
		fd, err := idmappedClone(l, userns)
		if err != nil {
			return err
		}
		// Open until the overlay exists: closing the last descriptor of
		// a detached mount dissolves it, and overlayfs clones the
		// layers only at create.
		defer unix.Close(fd)
		if err := unix.FsconfigSetFd(fsfd, "lowerdir+", fd); err != nil {
			return fmt.Errorf("overlayfs: lower layer %s (needs Linux 6.13): %w", l, err)
		}
	}
	for _, kv := range [][2]string{{"upperdir", upper}, {"workdir", work}, {"redirect_dir", "off"}, {"index", "off"}, {"metacopy", "off"}} {
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			return fmt.Errorf("overlayfs: %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("overlayfs: create: %w%s", err, fsLog(fsfd))
	}
	attrs := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	if suid {
		attrs = unix.MOUNT_ATTR_NODEV // Root.Sudo
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return fmt.Errorf("overlayfs: mount: %w", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("overlayfs: attach: %w", err)
	}
	return nil
}

// ensureHome gives an image without /home/user one (0700, the sandbox
// user's), written to the upper layer before anything runs inside. The
// image's tree is only looked at through os.Root: its symlinks resolve
// inside it.
func ensureHome(merged string, ids IDRange) error {
	root, err := os.OpenRoot(merged)
	if err != nil {
		return err
	}
	defer root.Close()
	home := HomeDir[1:]
	if _, err := root.Lstat(home); err == nil {
		return nil
	}
	parent := filepath.Dir(home)
	if _, err := root.Lstat(parent); errors.Is(err, fs.ErrNotExist) {
		if err := root.Mkdir(parent, 0o755); err != nil {
			return fmt.Errorf("home: %w", err)
		}
		if err := root.Lchown(parent, int(ids.Host(0)), int(ids.Host(0))); err != nil {
			return fmt.Errorf("home: %w", err)
		}
	}
	if err := root.Mkdir(home, 0o700); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	return root.Lchown(home, int(ids.Host(UID)), int(ids.Host(GID)))
}

// unmountImageRoot removes sandbox id's root, if any: the overlay, then
// the writable layer with everything in it. Nothing of the sandbox's tree
// is walked on the host.
func (r *Runtime) unmountImageRoot(id string) error {
	return teardown.UnmountImageRoot(r.rootDir(id))
}

// imageRootUsage is what sandbox id has written to its image root, or
// false when it has none.
func (r *Runtime) imageRootUsage(id string) (int64, bool) {
	dir := r.rootDir(id)
	if !isMountPoint(dir) {
		return 0, false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, true
}

// fsLog returns the messages a file system context has for its caller
// (the why of an EINVAL), as ": msg; msg", or "".
func fsLog(fsfd int) string {
	var out string
	b := make([]byte, 1024)
	for range 8 {
		n, err := unix.Read(fsfd, b)
		if err != nil || n <= 0 {
			break
		}
		out += "; " + string(b[:n])
	}
	if out == "" {
		return ""
	}
	return ":" + out[1:]
}
