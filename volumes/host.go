package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// A volume's bytes are one file, <dir>/<id>.img (0600, in a 0700 dir of
// root's), holding an ext4 file system of the volume's size: a sandbox
// that fills it gets ENOSPC from ext4, and the host's disk gives the file
// only the blocks written (it is sparse). The host never mounts it at a
// path: while a sandbox uses it, a loop device backs it and the daemon
// holds its file system as a detached mount (fsmount), of which each
// sandbox gets an id-mapped clone of its own (runtime/oci). So nothing of
// what a sandbox writes in a volume (symlinks, hardlinks, devices, FIFOs,
// sockets, set-id files) is ever a path on the host: the daemon reads,
// measures, backs up and deletes a volume as one regular file, never
// walking its tree. A loop device is configured to clear itself once its
// file system's last mount is gone (LO_FLAGS_AUTOCLEAR), so a volume no
// sandbox mounts holds nothing but its file.

// UID and GID own a new volume's root directory: the sandbox user, so
// that what runs as the user (every command by default) can write to it.
const (
	UID = 1000
	GID = 1000
)

// MinSizeBytes is the smallest volume: ext4 needs room for its journal
// and tables.
const MinSizeBytes = 16 << 20

// Host keeps volumes' files in one directory.
type Host struct {
	dir  string
	mkfs string // mkfs.ext4
}

// NewHost returns the host side of volumes kept in dir, made (0700) when
// missing. mkfs.ext4 must be on PATH or in /sbin, /usr/sbin.
func NewHost(dir string) (*Host, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("volumes dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("volumes dir: %w", err)
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
			if _, serr := os.Stat(p); serr == nil {
				mkfs, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("volumes need mkfs.ext4 (e2fsprogs): %w", errdefs.ErrFailedPrecondition)
	}
	return &Host{dir: dir, mkfs: mkfs}, nil
}

// Dir is the directory of the volumes' files.
func (h *Host) Dir() string { return h.dir }

func (h *Host) file(id string) (string, error) {
	if !ValidID(id) {
		return "", fmt.Errorf("volume id %q: %w", clip(id), errdefs.ErrInvalidArgument)
	}
	return filepath.Join(h.dir, id+".img"), nil
}

// Create makes volume id's file: size bytes, sparse, formatted ext4 with
// the root directory the sandbox user's. ErrAlreadyExists when it exists.
func (h *Host) Create(ctx context.Context, id string, size int64) (err error) {
	name, err := h.file(id)
	if err != nil {
		return err
	}
	if size < MinSizeBytes {
		return fmt.Errorf("volume size %d: at least %d: %w", size, MinSizeBytes, errdefs.ErrInvalidArgument)
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("volume %s: %w", id, errdefs.ErrAlreadyExists)
		}
		return fmt.Errorf("volume %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			os.Remove(name)
		}
	}()
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	// -m 0: no blocks kept for root, the sandbox gets the whole size;
	// lazy init: the tables are zeroed on first use, not by mkfs, which
	// keeps a create cheap and the file sparse.
	cmd := exec.CommandContext(ctx, h.mkfs, "-q", "-F", "-m", "0", "-L", "sandlot",
		"-E", fmt.Sprintf("root_owner=%d:%d,lazy_itable_init=1,lazy_journal_init=1,nodiscard", UID, GID), name)
	cmd.Env = []string{"PATH=/usr/sbin:/sbin:/usr/bin:/bin", "MKE2FS_CONFIG=/dev/null"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("volume %s: mkfs.ext4: %v: %s", id, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Remove deletes volume id's file. Removing one that is gone is not an
// error. A loop device still backing it keeps its blocks until its last
// mount goes.
func (h *Host) Remove(id string) error {
	name, err := h.file(id)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(unix.AT_FDCWD, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("volume %s: %w", id, err)
	}
	return nil
}

// Usage is how many bytes of the host's disk volume id's file holds.
func (h *Host) Usage(id string) (int64, error) {
	name, err := h.file(id)
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, fmt.Errorf("volume %s: %w", id, err)
	}
	return st.Blocks * 512, nil
}

// IDs lists the volumes whose files are in the directory, with each
// file's modification time.
func (h *Host) IDs() (map[string]time.Time, error) {
	ents, err := os.ReadDir(h.dir)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".img")
		if !ok || !ValidID(id) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil {
			out[id] = fi.ModTime()
		}
	}
	return out, nil
}

// Open returns volume id's file system as a detached mount (nosuid,
// nodev; fsmount(2)), whose descriptor the caller closes. The file's loop
// device is the one already backing it, if any, so that two sandboxes of
// a volume share one file system (two loop devices on one file would be
// two ext4 instances writing the same blocks). The caller serializes Open
// and Remove of one volume.
func (h *Host) Open(id string) (int, error) {
	name, err := h.file(id)
	if err != nil {
		return -1, err
	}
	img, err := os.OpenFile(name, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return -1, errdefs.Sentence(errdefs.ErrFailedPrecondition, "volume %s has no data on this host (a backup restores volumes' records, not their files)", id)
		}
		return -1, fmt.Errorf("volume %s: %w", id, err)
	}
	defer img.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(img.Fd()), &st); err != nil {
		return -1, fmt.Errorf("volume %s: %w", id, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, fmt.Errorf("volume %s: not a regular file: %w", id, errdefs.ErrFailedPrecondition)
	}
	loop, dev, err := findLoop(st.Dev, st.Ino)
	if err != nil {
		return -1, fmt.Errorf("volume %s: %w", id, err)
	}
	if loop < 0 {
		if loop, dev, err = attachLoop(int(img.Fd())); err != nil {
			return -1, fmt.Errorf("volume %s: %w", id, err)
		}
	}
	// Open until the file system holds the device: autoclear would
	// detach a loop device nothing holds.
	defer unix.Close(loop)
	return mountExt4(dev)
}

// findLoop returns an open descriptor and the path of the loop device
// backing the file (dev, ino), or -1 when none does.
func findLoop(dev, ino uint64) (int, string, error) {
	ents, err := os.ReadDir("/sys/block")
	if err != nil {
		return -1, "", err
	}
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "loop")
		if !ok {
			continue
		}
		if _, err := strconv.Atoi(n); err != nil {
			continue
		}
		p := "/dev/" + e.Name()
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		info, err := unix.IoctlLoopGetStatus64(fd)
		if err == nil && info.Device == dev && info.Inode == ino {
			return fd, p, nil
		}
		unix.Close(fd)
	}
	return -1, "", nil
}

// attachLoop backs a free loop device with the file img and returns it
// open, with its path.
func attachLoop(img int) (int, string, error) {
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("loop-control: %w", err)
	}
	defer unix.Close(ctl)
	for range 16 { // another process may take the free device first
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return -1, "", fmt.Errorf("free loop device: %w", err)
		}
		p := "/dev/loop" + strconv.Itoa(n)
		fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, "", fmt.Errorf("%s: %w", p, err)
		}
		cfg := &unix.LoopConfig{Fd: uint32(img), Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}}
		copy(cfg.Info.File_name[:], "sandlot-volume")
		err = unix.IoctlLoopConfigure(fd, cfg)
		if err == nil {
			return fd, p, nil
		}
		unix.Close(fd)
		if !errors.Is(err, unix.EBUSY) {
			return -1, "", fmt.Errorf("%s: configure: %w", p, err)
		}
	}
	return -1, "", fmt.Errorf("no free loop device: %w", errdefs.ErrUnavailable)
}

// mountExt4 returns the ext4 file system on dev as a detached mount.
func mountExt4(dev string) (int, error) {
	fsfd, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("ext4: %w", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigSetString(fsfd, "source", dev); err != nil {
		return -1, fmt.Errorf("ext4: source: %w", err)
	}
	// errors=remount-ro: a corrupt image stops writes, never panics the
	// host.
	if err := unix.FsconfigSetString(fsfd, "errors", "remount-ro"); err != nil {
		return -1, fmt.Errorf("ext4: errors: %w", err)
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("ext4: create: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, fmt.Errorf("ext4: mount: %w", err)
	}
	return mfd, nil
}
