package layer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// DiffOptions configures Diff. Zero values are documented per field.
type DiffOptions struct {
	// HostIDBase is the host id that was id 0 for the writer of the
	// directory (the first id of a sandbox's user namespace range): ids in
	// [HostIDBase, HostIDBase+65536) are written as id-HostIDBase, any other
	// id as NobodyID. 0: ids are written as they are (ids above MaxID
	// become NobodyID).
	HostIDBase uint32
	// Epoch, when not zero, clamps modification times to it (like
	// SOURCE_DATE_EPOCH), so rebuilding the same tree gives the same tar.
	Epoch time.Time
	// Limits bound the bytes and entries written; see Limits.
	Limits Limits
}

// Diff writes dir, an overlayfs upper directory (or any directory), as an
// uncompressed OCI layer tarball to w: entries sorted by path, 0:0 char
// devices as .wh.<name> whiteouts, opaque directories followed by their
// .wh..wh..opq marker, hardlinks kept, other devices and sockets left out.
//
// Diff reads the tree through directory descriptors, never through a path
// from dir: each entry is opened relative to its parent's descriptor with
// O_NOFOLLOW and checked to be the inode the listing saw, so a writer that
// swaps a directory for a symlink while Diff runs (a sandbox still
// running) can fail the diff but never make it read outside dir. A tree
// deeper than maxDiffDepth is refused (each level holds a descriptor).
//
// Precondition: nothing writes to dir while Diff runs (the sandbox that
// wrote it has stopped), or the tar is not a consistent copy.
func Diff(ctx context.Context, dir string, w io.Writer, opt DiffOptions) (Stats, error) {
	d := &differ{opt: opt, lim: opt.Limits.withDefaults(), tw: tar.NewWriter(w), links: map[[2]uint64]string{}}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return d.st, fmt.Errorf("layer: diff %s: %w", dir, err)
	}
	err = d.walk(ctx, fd, "", 0)
	if err == nil {
		err = d.tw.Close()
	}
	return d.st, err
}

// maxDiffDepth bounds the directories Diff holds open at once.
const maxDiffDepth = 512

// testHookListed, when set (tests), is called once a directory's entries
// are listed and before any of them is read: where a writer still running
// would swap a directory for a symlink.
var testHookListed func(rel string)

type differ struct {
	opt   DiffOptions
	lim   Limits
	tw    *tar.Writer
	st    Stats
	links map[[2]uint64]string // (dev, ino) -> first name written
}

// walk writes the entries of the directory open as dirfd (whose name in
// the layer is rel), sorted by name, and closes dirfd.
func (d *differ) walk(ctx context.Context, dirfd int, rel string, depth int) error {
	f := os.NewFile(uintptr(dirfd), rel)
	defer f.Close()
	if depth > maxDiffDepth {
		return fmt.Errorf("layer: diff: more than %d directory levels: %w", maxDiffDepth, errdefs.ErrResourceExhausted)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("layer: diff %s: %w", rel, err)
	}
	sort.Strings(names)
	if testHookListed != nil {
		testHookListed(rel)
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := d.one(ctx, dirfd, name, path.Join(rel, name), depth); err != nil {
			return err
		}
	}
	return nil
}

// openSame opens name below dirfd without following a symlink and checks
// it is the inode st describes (the entry was not swapped meanwhile).
func openSame(dirfd int, name, rel string, flags int, st *unix.Stat_t) (int, error) {
	fd, err := unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("layer: diff open %s: %w", rel, err)
	}
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("layer: diff %s: %w", rel, err)
	}
	if now.Dev != st.Dev || now.Ino != st.Ino || now.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
		unix.Close(fd)
		return -1, fmt.Errorf("layer: diff %s: changed while read: %w", rel, errdefs.ErrFailedPrecondition)
	}
	return fd, nil
}

func (d *differ) one(ctx context.Context, dirfd int, name, rel string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("layer: diff stat %s: %w", rel, err)
	}
	d.st.Entries++
	if d.st.Entries > d.lim.MaxEntries {
		return fmt.Errorf("layer: more than %d entries: %w", d.lim.MaxEntries, errdefs.ErrResourceExhausted)
	}
	hdr := &tar.Header{
		Name:    rel,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     d.id(st.Uid),
		Gid:     d.id(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()).UTC(),
		Format:  tar.FormatPAX,
	}
	if !d.opt.Epoch.IsZero() && hdr.ModTime.After(d.opt.Epoch) {
		hdr.ModTime = d.opt.Epoch
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
		fd, err := openSame(dirfd, name, rel, unix.O_RDONLY|unix.O_DIRECTORY, &st)
		if err != nil {
			return err
		}
		if err := d.xattrs(fd, hdr); err != nil {
			unix.Close(fd)
			return err
		}
		if err := d.tw.WriteHeader(hdr); err != nil {
			unix.Close(fd)
			return err
		}
		if isOpaque(fd) {
			d.st.Opaques++
			if err := d.tw.WriteHeader(&tar.Header{Name: rel + "/" + opaqueMarker, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: hdr.ModTime, Format: tar.FormatPAX}); err != nil {
				unix.Close(fd)
				return err
			}
		}
		return d.walk(ctx, fd, rel, depth+1)
	case unix.S_IFREG:
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := d.links[key]; ok && st.Nlink > 1 {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			return d.tw.WriteHeader(hdr)
		}
		if st.Size > d.lim.MaxBytes-d.st.Bytes {
			return fmt.Errorf("layer: diff: more than %d bytes: %w", d.lim.MaxBytes, errdefs.ErrResourceExhausted)
		}
		fd, err := openSame(dirfd, name, rel, unix.O_RDONLY|unix.O_NONBLOCK, &st)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), rel)
		defer f.Close()
		d.links[key] = rel
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		if err := d.xattrs(fd, hdr); err != nil {
			return err
		}
		if err := d.tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.Copy(d.tw, io.LimitReader(f, hdr.Size))
		d.st.Bytes += n
		if err == nil && n != hdr.Size {
			err = fmt.Errorf("layer: diff %s: file shrank while read", rel)
		}
		return err
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return fmt.Errorf("layer: diff readlink %s: %w", rel, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, string(buf[:n])
		return d.tw.WriteHeader(hdr)
	case unix.S_IFIFO:
		// Never opened (an open would wait for a writer); its xattrs,
		// which only a descriptor could read safely, are not kept.
		hdr.Typeflag = tar.TypeFifo
		return d.tw.WriteHeader(hdr)
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			d.st.SkippedDevices++
			return nil
		}
		d.st.Whiteouts++
		dir, base := path.Split(rel)
		wh := &tar.Header{Name: dir + whiteoutPrefix + base, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: hdr.ModTime, Format: tar.FormatPAX}
		return d.tw.WriteHeader(wh)
	case unix.S_IFBLK:
		d.st.SkippedDevices++
		return nil
	default: // sockets
		d.st.SkippedOther++
		return nil
	}
}

func (d *differ) id(v uint32) int {
	if base := d.opt.HostIDBase; base != 0 {
		if v < base || v-base > MaxID {
			d.st.ClampedIDs++
			return NobodyID
		}
		return int(v - base)
	}
	if v > MaxID {
		d.st.ClampedIDs++
		return NobodyID
	}
	return int(v)
}

func isOpaque(fd int) bool {
	for _, name := range []string{xattrOpaque, xattrUserOpaque} {
		buf := make([]byte, 8)
		n, err := unix.Fgetxattr(fd, name, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// xattrs records the user.* xattrs of the open fd, the same set Apply
// keeps.
func (d *differ) xattrs(fd int, hdr *tar.Header) error {
	sz, err := unix.Flistxattr(fd, nil)
	if err != nil || sz == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return err
	}
	buf := make([]byte, sz)
	sz, err = unix.Flistxattr(fd, buf)
	if err != nil {
		return err
	}
	total := 0
	for _, name := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
		if !strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "user.overlay.") {
			continue
		}
		val := make([]byte, d.lim.MaxXattrBytes)
		n, err := unix.Fgetxattr(fd, name, val)
		if errors.Is(err, unix.ERANGE) {
			return fmt.Errorf("layer: diff %s: xattr %s too large: %w", hdr.Name, name, errdefs.ErrResourceExhausted)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODATA) {
				continue
			}
			return err
		}
		total += len(name) + n
		if total > d.lim.MaxXattrBytes {
			return fmt.Errorf("layer: diff %s: xattrs over %d bytes: %w", hdr.Name, d.lim.MaxXattrBytes, errdefs.ErrResourceExhausted)
		}
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords["SCHILY.xattr."+name] = string(val[:n])
	}
	return nil
}
