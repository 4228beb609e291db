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
	"path/filepath"
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
// Precondition: nothing writes to dir while Diff runs (the sandbox that
// wrote it has stopped). Diff never follows a symlink in dir.
func Diff(ctx context.Context, dir string, w io.Writer, opt DiffOptions) (Stats, error) {
	d := &differ{opt: opt, lim: opt.Limits.withDefaults(), tw: tar.NewWriter(w), links: map[[2]uint64]string{}}
	err := d.walk(ctx, dir, "")
	if err == nil {
		err = d.tw.Close()
	}
	return d.st, err
}

type differ struct {
	opt   DiffOptions
	lim   Limits
	tw    *tar.Writer
	st    Stats
	links map[[2]uint64]string // (dev, ino) -> first name written
}

// walk writes the entries below abs (whose name in the layer is rel),
// sorted by name.
func (d *differ) walk(ctx context.Context, abs, rel string) error {
	ents, err := os.ReadDir(abs)
	if err != nil {
		return fmt.Errorf("layer: diff %s: %w", abs, err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, r := filepath.Join(abs, e.Name()), path.Join(rel, e.Name())
		if err := d.one(ctx, p, r); err != nil {
			return err
		}
	}
	return nil
}

func (d *differ) one(ctx context.Context, abs, rel string) error {
	var st unix.Stat_t
	if err := unix.Lstat(abs, &st); err != nil {
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
	opaque := false
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
		opaque = isOpaque(abs)
	case unix.S_IFREG:
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := d.links[key]; ok && st.Nlink > 1 {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
		} else {
			d.links[key] = rel
			hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		}
	case unix.S_IFLNK:
		target, err := os.Readlink(abs)
		if err != nil {
			return fmt.Errorf("layer: diff readlink %s: %w", rel, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
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
	if hdr.Typeflag != tar.TypeSymlink {
		if err := d.xattrs(abs, hdr); err != nil {
			return err
		}
	}
	if hdr.Typeflag == tar.TypeReg {
		if hdr.Size > d.lim.MaxBytes-d.st.Bytes {
			return fmt.Errorf("layer: diff: more than %d bytes: %w", d.lim.MaxBytes, errdefs.ErrResourceExhausted)
		}
		f, err := os.OpenFile(abs, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("layer: diff open %s: %w", rel, err)
		}
		defer f.Close()
		if err := d.tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.Copy(d.tw, io.LimitReader(f, hdr.Size))
		d.st.Bytes += n
		if err == nil && n != hdr.Size {
			err = fmt.Errorf("layer: diff %s: file shrank while read", rel)
		}
		return err
	}
	if err := d.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeDir {
		return nil
	}
	if opaque {
		d.st.Opaques++
		if err := d.tw.WriteHeader(&tar.Header{Name: rel + "/" + opaqueMarker, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: hdr.ModTime, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return d.walk(ctx, abs, rel)
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

func isOpaque(abs string) bool {
	for _, name := range []string{xattrOpaque, xattrUserOpaque} {
		buf := make([]byte, 8)
		n, err := unix.Lgetxattr(abs, name, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// xattrs records the user.* xattrs of abs, the same set Apply keeps.
func (d *differ) xattrs(abs string, hdr *tar.Header) error {
	sz, err := unix.Llistxattr(abs, nil)
	if err != nil || sz == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return err
	}
	buf := make([]byte, sz)
	sz, err = unix.Llistxattr(abs, buf)
	if err != nil {
		return err
	}
	total := 0
	for _, name := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
		if !strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "user.overlay.") {
			continue
		}
		val := make([]byte, d.lim.MaxXattrBytes)
		n, err := unix.Lgetxattr(abs, name, val)
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
