package oci

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// copyLayer copies the writable layer at src (an overlay upper dir, the
// sandbox's and hostile) to dst, which it creates, exactly as overlayfs
// needs it again: owners, modes (set-id bits too), xattrs (overlay's
// trusted.* opaque marks among them), times, hard links, whiteouts (char
// devices 0/0), FIFOs, sockets and sparse files as sparse files.
//
// Nothing in the tree is followed or opened by path: every entry is
// reached from its parent's descriptor (O_NOFOLLOW), a symlink is copied
// as a symlink, a hard link is made from a parent reopened beneath dst
// with no symlink allowed, and only regular files and directories are
// ever opened, each checked after its open to be the file its stat saw
// (openStated). A device other than a whiteout is refused, as are trees
// past lim. The caller holds the tree still (the sandbox is stopped); an
// entry swapped under the copy all the same is refused, never followed.
// On failure dst is left for the caller to remove.
func copyLayer(src, dst string, lim layerLimits) error {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("layer copy: %w", err)
	}
	defer unix.Close(sfd)
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return fmt.Errorf("layer copy: %w", err)
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return fmt.Errorf("layer copy: %w", err)
	}
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("layer copy: %w", err)
	}
	defer unix.Close(dfd)
	c := &layerCopier{lim: lim, root: dfd, links: map[fileKey]string{}, buf: make([]byte, 128<<10)}
	if err := c.dir(sfd, dfd, ".", 0); err != nil {
		return fmt.Errorf("layer copy: %w", err)
	}
	// The top directory last: its times after its entries were made.
	return c.attrs(sfd, dfd, -1, -1, "", &st)
}

// layerLimits bound a layer copy.
type layerLimits struct {
	Entries   int   // entries in the tree
	Depth     int   // directory levels
	DataBytes int64 // bytes of file data (holes not counted)
	LinkBytes int   // bytes of the paths remembered for hard links
}

// defaultLayerLimits are layer.Limits' bounds; the data is bounded by the
// layer's own tmpfs.
var defaultLayerLimits = layerLimits{Entries: 1 << 20, Depth: 512, DataBytes: 1 << 40, LinkBytes: 16 << 20}

// errLayerBound is a tree past layerLimits.
var errLayerBound = fmt.Errorf("layer past its copy bounds: %w", errdefs.ErrResourceExhausted)

type fileKey struct{ dev, ino uint64 }

type layerCopier struct {
	lim       layerLimits
	root      int                // dst's descriptor
	links     map[fileKey]string // first copy of a multiply-linked file, relative to root
	entries   int
	bytes     int64
	linkBytes int // of the paths in links (a layer of many multiply-linked files deep down)
	buf       []byte
	xnames    []byte // copyXattrs' buffers, made once per copy, not per entry
	xval      []byte
}

// dir copies the entries of directory sfd into dfd (rel: dfd's path
// below the root, for hard links).
func (c *layerCopier) dir(sfd, dfd int, rel string, depth int) error {
	if depth >= c.lim.Depth {
		return errLayerBound
	}
	d, err := unix.Dup(sfd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(d), "layer dir")
	defer f.Close()
	// In batches, each counted before it is copied: a directory of a
	// million long names is never held whole.
	for {
		names, err := f.Readdirnames(512)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if c.entries += len(names); c.entries > c.lim.Entries {
			return errLayerBound
		}
		for _, name := range names {
			if err := c.entry(sfd, dfd, rel, name, depth); err != nil {
				return fmt.Errorf("%s: %w", path.Join(rel, name), err)
			}
		}
	}
}

// layerEntryStat, when set (tests), runs between an entry's stat and its
// open: the window in which the tree could change under the copy.
var layerEntryStat func(name string)

// entry copies name of directory sfd into dfd.
func (c *layerCopier) entry(sfd, dfd int, rel, name string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if layerEntryStat != nil {
		layerEntryStat(name)
	}
	mode := st.Mode & unix.S_IFMT
	key := fileKey{uint64(st.Dev), st.Ino}
	if mode != unix.S_IFDIR && st.Nlink > 1 {
		if first, ok := c.links[key]; ok {
			return c.link(first, dfd, name)
		}
		first := path.Join(rel, name)
		if c.linkBytes += len(first); c.linkBytes > c.lim.LinkBytes {
			return errLayerBound
		}
		c.links[key] = first
	}
	switch mode {
	case unix.S_IFDIR:
		fd, err := openStated(sfd, name, unix.O_DIRECTORY, &st)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return err
		}
		nfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(nfd)
		if err := c.dir(fd, nfd, path.Join(rel, name), depth+1); err != nil {
			return err
		}
		return c.attrs(fd, nfd, -1, -1, "", &st)
	case unix.S_IFREG:
		fd, err := openStated(sfd, name, 0, &st)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		nfd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		defer unix.Close(nfd)
		if err := c.data(fd, nfd, st.Size); err != nil {
			return err
		}
		return c.attrs(fd, nfd, -1, -1, "", &st)
	case unix.S_IFLNK:
		target, err := readlinkat(sfd, name)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return err
		}
	case unix.S_IFCHR:
		if st.Rdev != 0 { // overlayfs's whiteout is 0/0; nothing else belongs here
			return fmt.Errorf("a device %d:%d in the layer: %w", unix.Major(st.Rdev), unix.Minor(st.Rdev), errdefs.ErrInvalidArgument)
		}
		if err := unix.Mknodat(dfd, name, unix.S_IFCHR|0o600, 0); err != nil {
			return err
		}
	case unix.S_IFIFO, unix.S_IFSOCK:
		if err := unix.Mknodat(dfd, name, mode|0o600, 0); err != nil {
			return err
		}
	default:
		return fmt.Errorf("a file of type %#o in the layer: %w", mode, errdefs.ErrInvalidArgument)
	}
	return c.attrs(-1, -1, sfd, dfd, name, &st)
}

// openStated opens name in directory sfd (flags added to read-only, no
// symlink followed, no blocking: a FIFO put there opens at once) and
// checks that what it opened is the file st describes: the same type,
// device and inode. Between the stat and the open the entry may have been
// swapped (the sandbox is stopped, but the copy does not rest on it): a
// FIFO, a directory, another file whose data would be copied under st's
// owner and mode.
func openStated(sfd int, name string, flags int, st *unix.Stat_t) (int, error) {
	fd, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return -1, err
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if got.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT || got.Dev != st.Dev || got.Ino != st.Ino {
		unix.Close(fd)
		return -1, fmt.Errorf("the entry changed while it was copied: %w", errdefs.ErrInvalidArgument)
	}
	return fd, nil
}

// link makes name in dfd a hard link of the copy at first (relative to
// the root), whose parent is reopened beneath the root, through no
// symlink.
func (c *layerCopier) link(first string, dfd int, name string) error {
	dir, base := path.Split(first)
	if dir == "" {
		dir = "."
	}
	pfd, err := unix.Openat2(c.root, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.Linkat(pfd, base, dfd, name, 0)
}

// data copies a regular file's data, skipping its holes (a sparse file of
// any apparent size costs only its data), then sets its size.
func (c *layerCopier) data(sfd, dfd int, size int64) error {
	var off int64
	for off < size {
		start, err := unix.Seek(sfd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return err
		}
		end, err := unix.Seek(sfd, start, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if c.bytes += end - start; c.bytes > c.lim.DataBytes {
			return errLayerBound
		}
		for p := start; p < end; {
			n, err := unix.Pread(sfd, c.buf[:min(int64(len(c.buf)), end-p)], p)
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
			if _, err := unix.Pwrite(dfd, c.buf[:n], p); err != nil {
				return err
			}
			p += int64(n)
		}
		off = end
	}
	return unix.Ftruncate(dfd, size)
}

// attrs gives a copy its source's owner, mode, xattrs and times: through
// descriptors (sfd, dfd) for files and directories (pdfd -1), else by
// name in the directories spdfd (the source's) and pdfd, never followed.
func (c *layerCopier) attrs(sfd, dfd, spdfd, pdfd int, name string, st *unix.Stat_t) error {
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if pdfd < 0 {
		// The owner first: a chown clears set-id bits, which the chmod sets.
		if err := unix.Fchown(dfd, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		if err := unix.Fchmod(dfd, st.Mode&0o7777); err != nil {
			return err
		}
		if err := c.copyXattrs(xattrRef{fd: sfd}, xattrRef{fd: dfd}); err != nil {
			return err
		}
		return unix.UtimesNanoAt(dfd, "", ts, unix.AT_EMPTY_PATH)
	}
	if err := unix.Fchownat(pdfd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK { // what entry made here: no symlink
		if err := unix.Fchmodat(pdfd, name, st.Mode&0o7777, 0); err != nil {
			return err
		}
	}
	if err := c.copyXattrs(xattrAt(spdfd, name), xattrAt(pdfd, name)); err != nil {
		return err
	}
	return unix.UtimesNanoAt(pdfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// xattrRef names a file whose xattrs are read or written: its descriptor,
// or (fd -1) a path whose last component is not followed.
type xattrRef struct {
	fd   int
	path string
}

// xattrAt refers to name in directory dfd, through the descriptor's
// /proc link (the directory itself; name is not followed).
func xattrAt(dfd int, name string) xattrRef {
	return xattrRef{fd: -1, path: fmt.Sprintf("/proc/self/fd/%d/%s", dfd, name)}
}

func (x xattrRef) list(b []byte) (int, error) {
	if x.fd >= 0 {
		return unix.Flistxattr(x.fd, b)
	}
	return unix.Llistxattr(x.path, b)
}

func (x xattrRef) get(attr string, b []byte) (int, error) {
	if x.fd >= 0 {
		return unix.Fgetxattr(x.fd, attr, b)
	}
	return unix.Lgetxattr(x.path, attr, b)
}

func (x xattrRef) set(attr string, v []byte) error {
	if x.fd >= 0 {
		return unix.Fsetxattr(x.fd, attr, v, 0)
	}
	return unix.Lsetxattr(x.path, attr, v, 0)
}

// xattrMax is the kernel's bound on a list of names and on a value.
const xattrMax = 64 << 10

// copyXattrs copies every xattr of src to dst as it is (overlayfs's
// trusted.overlay.* marks, security.capability, user.*).
func (c *layerCopier) copyXattrs(src, dst xattrRef) error {
	if c.xnames == nil {
		c.xnames, c.xval = make([]byte, xattrMax), make([]byte, xattrMax)
	}
	names, val := c.xnames, c.xval
	n, err := src.list(names)
	if errors.Is(err, unix.ENOTSUP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("xattrs: %w", err)
	}
	for _, attr := range strings.Split(string(names[:n]), "\x00") {
		if attr == "" {
			continue
		}
		m, err := src.get(attr, val)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return fmt.Errorf("xattr %s: %w", attr, err)
		}
		if err := dst.set(attr, val[:m]); err != nil {
			return fmt.Errorf("xattr %s: %w", attr, err)
		}
	}
	return nil
}

// readlinkat reads symlink name in directory dfd.
func readlinkat(dfd int, name string) (string, error) {
	b := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dfd, name, b)
	if err != nil {
		return "", err
	}
	return string(b[:n]), nil
}
