// Package layer turns OCI layer tarballs into directories that overlayfs can
// stack directly, and overlayfs upper directories back into layer tarballs.
//
// Apply is attack surface: a layer comes from anywhere. Every path is
// resolved by the kernel inside the layer directory (openat2 with
// RESOLVE_IN_ROOT), so no entry, symlink or hardlink can reach outside it;
// files are created with O_EXCL|O_NOFOLLOW, device nodes are skipped,
// setuid bits are stripped, only user.* xattrs are kept, and sizes and entry
// counts are bounded. OCI whiteouts become overlayfs whiteouts. The rules
// are written down in docs/images.md.
package layer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/openat2"
)

// Limits bound what one layer may put on disk. Zero values take the
// defaults below.
type Limits struct {
	MaxBytes      int64 // sum of regular file sizes; 0: 16 GiB
	MaxEntries    int   // tar entries; 0: 1<<20
	MaxXattrBytes int   // names plus values of one entry's xattrs; 0: 64 KiB
	// Check, when set, sees each entry's header before it is written; its
	// error stops Apply (a caller's stricter rules for what it unpacks).
	Check func(*tar.Header) error
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 16 << 30
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 1 << 20
	}
	if l.MaxXattrBytes <= 0 {
		l.MaxXattrBytes = 64 << 10
	}
	return l
}

// Stats tells what Apply did, including what it refused to reproduce.
type Stats struct {
	Entries        int   // tar entries read
	Bytes          int64 // regular file bytes written
	Whiteouts      int   // .wh.<name> entries turned into 0:0 char devices
	Opaques        int   // .wh..wh..opq entries turned into opaque directories
	SkippedDevices int   // char and block devices (never created)
	SkippedOther   int   // entry types sandlot does not reproduce
	StrippedSetID  int   // files whose setuid/setgid bit was removed
	ClampedIDs     int   // entries whose uid or gid was above MaxID
	DroppedXattrs  int   // xattrs outside user.*
}

// MaxID is the highest uid or gid a layer keeps: sandboxes see image files
// through a 65536-id user namespace, where any other id would show as the
// overflow id. Larger ids are written as NobodyID.
const (
	MaxID    = 65535
	NobodyID = 65534
)

// Overlayfs markers. Whiteouts are 0:0 char devices; an opaque directory
// carries the opaque xattr in both namespaces overlayfs reads: trusted.*
// (a mount by real root) and user.* (a mount with userxattr, as made inside
// a user namespace), so one layer directory serves both.
const (
	whiteoutPrefix  = ".wh."
	whiteoutMeta    = ".wh..wh."
	opaqueMarker    = ".wh..wh..opq"
	xattrOpaque     = "trusted.overlay.opaque"
	xattrUserOpaque = "user.overlay.opaque"
)

func invalid(format string, a ...any) error {
	return fmt.Errorf("layer: "+format+": %w", append(a, errdefs.ErrInvalidArgument)...)
}

// Apply unpacks the uncompressed layer tarball r into dir, which must be an
// empty directory that nothing else writes to while Apply runs. On error,
// dir holds a partial tree that the caller removes.
func Apply(ctx context.Context, dir string, r io.Reader, lim Limits) (Stats, error) {
	lim = lim.withDefaults()
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stats{}, fmt.Errorf("layer: open %s: %w", dir, err)
	}
	defer unix.Close(root)
	a := &applier{root: root, lim: lim, lastFD: -1}
	defer a.forget()
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return a.st, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return a.st, invalid("read tar: %v", err)
		}
		a.st.Entries++
		if a.st.Entries > lim.MaxEntries {
			return a.st, fmt.Errorf("layer: more than %d entries: %w", lim.MaxEntries, errdefs.ErrResourceExhausted)
		}
		if lim.Check != nil {
			if err := lim.Check(hdr); err != nil {
				return a.st, err
			}
		}
		if err := a.entry(hdr, tr); err != nil {
			return a.st, err
		}
	}
	// Directory times last: creating entries inside a directory moved them.
	for i := len(a.dirTimes) - 1; i >= 0; i-- {
		d := a.dirTimes[i]
		fd, err := a.resolve(d.rel)
		if err != nil {
			continue // replaced by a later entry
		}
		err = setTimes(fd, "", d.hdr)
		unix.Close(fd)
		if err != nil {
			return a.st, fmt.Errorf("layer: times of %q: %w", d.rel, err)
		}
	}
	return a.st, nil
}

type applier struct {
	root     int
	lim      Limits
	st       Stats
	dirTimes []dirTime

	// lastDir/lastFD cache the parent directory of the previous entry:
	// tarballs list a directory's entries together, and resolving the
	// parent anew for each was most of the cost. Any entry that could
	// change what a path resolves to (a symlink, a removed or replaced
	// directory) drops the cache.
	lastDir string
	lastFD  int
	stale   bool // set mid-entry; the cache is dropped before the next entry
}

func (a *applier) forget() {
	if a.lastFD >= 0 {
		unix.Close(a.lastFD)
	}
	a.lastDir, a.lastFD, a.stale = "", -1, false
}

// parent returns an fd of the directory dir (created if missing), owned by
// the cache: the caller does not close it.
func (a *applier) parent(dir string) (int, error) {
	if a.lastFD >= 0 && a.lastDir == dir && !a.stale {
		return a.lastFD, nil
	}
	a.forget()
	fd, err := a.mkdirAll(dir)
	if err != nil {
		return -1, err
	}
	a.lastDir, a.lastFD = dir, fd
	return fd, nil
}

type dirTime struct {
	rel string
	hdr *tar.Header
}

// clean turns a tar name into a path relative to the layer root. Leading
// slashes are dropped (the name is relative to the image root either way);
// a ".." component is refused rather than clamped, since no honest layer
// has one.
func clean(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", invalid("entry name with NUL byte")
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", invalid("entry %q escapes the layer", name)
		}
	}
	p := strings.TrimPrefix(path.Clean("/"+name), "/")
	return p, nil
}

func (a *applier) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := clean(hdr.Name)
	if err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if rel == "" {
		// The layer root itself ("./"): only its metadata applies.
		if hdr.Typeflag != tar.TypeDir {
			return invalid("entry %q: the root must be a directory", hdr.Name)
		}
		return a.meta(a.root, "", hdr)
	}
	dir, base := path.Split(rel)
	parent, err := a.parent(strings.TrimSuffix(dir, "/"))
	if err != nil {
		return fmt.Errorf("layer: entry %q: %w", hdr.Name, err)
	}

	if strings.HasPrefix(base, whiteoutPrefix) {
		return a.whiteout(parent, rel, base)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return a.dir(parent, rel, base, hdr)
	case tar.TypeReg, tar.TypeRegA:
		return a.file(parent, base, hdr, r)
	case tar.TypeSymlink:
		if err := a.replace(parent, base); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
			return fmt.Errorf("layer: symlink %q: %w", rel, err)
		}
		a.stale = true // a path through base now means something else
		return a.meta(parent, base, hdr)
	case tar.TypeLink:
		return a.link(parent, rel, base, hdr)
	case tar.TypeFifo:
		if err := a.replace(parent, base); err != nil {
			return err
		}
		if err := unix.Mknodat(parent, base, unix.S_IFIFO|0o600, 0); err != nil {
			return fmt.Errorf("layer: fifo %q: %w", rel, err)
		}
		return a.meta(parent, base, hdr)
	case tar.TypeChar, tar.TypeBlock:
		// Device nodes are never created: a sandbox gets its /dev from the
		// runtime, and a node in the store would be a door on the host.
		a.st.SkippedDevices++
		return nil
	default:
		a.st.SkippedOther++
		return nil
	}
}

// resolve opens the directory rel (relative to the layer root) with every
// symlink resolved as if the layer root were "/": the kernel clamps ".." and
// absolute targets to the root, so nothing outside the layer is reachable.
func (a *applier) resolve(rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	return openat2.Open(a.root, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
}

// mkdirAll resolves rel inside the layer, creating missing directories
// (0755, root) on the way, and returns an fd of it.
func (a *applier) mkdirAll(rel string) (int, error) {
	fd, err := a.resolve(rel)
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	cur, err := a.resolve("")
	if err != nil {
		return -1, err
	}
	done := ""
	for _, c := range strings.Split(rel, "/") {
		next := path.Join(done, c)
		fd, err := a.resolve(next)
		if errors.Is(err, unix.ENOENT) {
			// cur is a resolved directory and c a single name: mkdirat
			// cannot leave the layer. A dangling symlink named c makes
			// mkdirat fail with EEXIST, never follow it.
			if err := unix.Mkdirat(cur, c, 0o755); err != nil {
				unix.Close(cur)
				if errors.Is(err, unix.EEXIST) {
					return -1, invalid("%q is a dangling symlink", next)
				}
				return -1, fmt.Errorf("mkdir %q: %w", next, err)
			}
			fd, err = a.resolve(next)
		}
		unix.Close(cur)
		if err != nil {
			return -1, fmt.Errorf("open %q: %w", next, err)
		}
		cur, done = fd, next
	}
	return cur, nil
}

// replace removes what is at parent/base, if anything, unless it is a
// directory (for which the caller decides).
func (a *applier) replace(parent int, base string) error {
	var st unix.Stat_t
	err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		a.stale = true // the cached directory may have been inside
		return removeAllAt(parent, base)
	}
	return unix.Unlinkat(parent, base, 0)
}

func (a *applier) dir(parent int, rel, base string, hdr *tar.Header) error {
	var st unix.Stat_t
	err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
	case err == nil:
		if err := unix.Unlinkat(parent, base, 0); err != nil {
			return err
		}
		a.stale = true // base was a symlink or file; a path through it changes
		fallthrough
	case errors.Is(err, unix.ENOENT):
		if err := unix.Mkdirat(parent, base, 0o700); err != nil {
			return fmt.Errorf("layer: mkdir %q: %w", rel, err)
		}
	default:
		return err
	}
	fd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("layer: open %q: %w", rel, err)
	}
	defer unix.Close(fd)
	if err := a.meta(fd, "", hdr); err != nil {
		return err
	}
	a.dirTimes = append(a.dirTimes, dirTime{rel: rel, hdr: hdr})
	return nil
}

func (a *applier) file(parent int, base string, hdr *tar.Header, r io.Reader) error {
	if hdr.Size < 0 || hdr.Size > a.lim.MaxBytes-a.st.Bytes {
		return fmt.Errorf("layer: %q: more than %d bytes in the layer: %w", hdr.Name, a.lim.MaxBytes, errdefs.ErrResourceExhausted)
	}
	if err := a.replace(parent, base); err != nil {
		return err
	}
	fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("layer: create %q: %w", hdr.Name, err)
	}
	f := os.NewFile(uintptr(fd), hdr.Name)
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(r, hdr.Size))
	a.st.Bytes += n
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("%q: truncated", hdr.Name)
	}
	if err != nil {
		return fmt.Errorf("layer: write %q: %w", hdr.Name, err)
	}
	if n != hdr.Size {
		return invalid("%q: truncated", hdr.Name)
	}
	return a.meta(fd, "", hdr)
}

func (a *applier) link(parent int, rel, base string, hdr *tar.Header) error {
	target, err := clean(hdr.Linkname)
	if err != nil || target == "" {
		return invalid("hardlink %q -> %q escapes the layer", hdr.Name, hdr.Linkname)
	}
	tdir, tbase := path.Split(target)
	tparent, err := a.resolve(strings.TrimSuffix(tdir, "/"))
	if err != nil {
		return invalid("hardlink %q -> %q: target not in this layer", hdr.Name, hdr.Linkname)
	}
	defer unix.Close(tparent)
	var st unix.Stat_t
	if err := unix.Fstatat(tparent, tbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return invalid("hardlink %q -> %q: target not in this layer", hdr.Name, hdr.Linkname)
	}
	if m := st.Mode & unix.S_IFMT; m == unix.S_IFDIR || m == unix.S_IFCHR || m == unix.S_IFBLK {
		return invalid("hardlink %q -> %q: target is not a file", hdr.Name, hdr.Linkname)
	}
	if err := a.replace(parent, base); err != nil {
		return err
	}
	// Flags 0: a symlink target is linked as the symlink, never followed.
	if err := unix.Linkat(tparent, tbase, parent, base, 0); err != nil {
		return fmt.Errorf("layer: hardlink %q: %w", rel, err)
	}
	return nil
}

func (a *applier) whiteout(parent int, rel, base string) error {
	if base == opaqueMarker {
		a.st.Opaques++
		for _, name := range []string{xattrOpaque, xattrUserOpaque} {
			if err := unix.Fsetxattr(parent, name, []byte("y"), 0); err != nil {
				return fmt.Errorf("layer: opaque %q: %w", rel, err)
			}
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		// Other AUFS metadata (.wh..wh.plnk, .wh..wh.aufs) means nothing here.
		a.st.SkippedOther++
		return nil
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." {
		return invalid("whiteout %q names nothing", rel)
	}
	// A whiteout hides only lower layers: a same-named entry of this layer
	// stays.
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return nil
	}
	if err := unix.Mknodat(parent, name, unix.S_IFCHR, 0); err != nil {
		return fmt.Errorf("layer: whiteout %q: %w", rel, err)
	}
	a.st.Whiteouts++
	return nil
}

// meta sets owner, mode, xattrs and (except for directories) times. With
// base "", fd is the object itself; else fd is its parent.
func (a *applier) meta(fd int, base string, hdr *tar.Header) error {
	uid, gid := a.id(hdr.Uid), a.id(hdr.Gid)
	isLink := hdr.Typeflag == tar.TypeSymlink
	flags := unix.AT_SYMLINK_NOFOLLOW
	if base == "" {
		flags = unix.AT_EMPTY_PATH
	}
	if err := unix.Fchownat(fd, base, uid, gid, flags); err != nil {
		return fmt.Errorf("layer: chown %q: %w", hdr.Name, err)
	}
	if !isLink {
		mode := uint32(hdr.Mode) & 0o7777
		if mode&unix.S_ISUID != 0 || (mode&unix.S_ISGID != 0 && hdr.Typeflag != tar.TypeDir) {
			a.st.StrippedSetID++
			mode &^= unix.S_ISUID
			if hdr.Typeflag != tar.TypeDir {
				mode &^= unix.S_ISGID
			}
		}
		var err error
		if base == "" {
			err = unix.Fchmod(fd, mode)
		} else {
			err = unix.Fchmodat(fd, base, mode, 0)
		}
		if err != nil {
			return fmt.Errorf("layer: chmod %q: %w", hdr.Name, err)
		}
	}
	if err := a.xattrs(fd, base, hdr); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeDir {
		return nil
	}
	return setTimes(fd, base, hdr)
}

func (a *applier) id(v int) int {
	if v < 0 || v > MaxID {
		a.st.ClampedIDs++
		return NobodyID
	}
	return v
}

// xattrs keeps user.* attributes except user.overlay.*: trusted.* and
// user.overlay.* steer overlayfs (whiteouts, redirects, metacopy), security.*
// carries file capabilities and labels, system.* ACLs naming host ids.
func (a *applier) xattrs(fd int, base string, hdr *tar.Header) error {
	total := 0
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if !strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "user.overlay.") {
			a.st.DroppedXattrs++
			continue
		}
		total += len(name) + len(v)
		if total > a.lim.MaxXattrBytes {
			return fmt.Errorf("layer: %q: xattrs over %d bytes: %w", hdr.Name, a.lim.MaxXattrBytes, errdefs.ErrResourceExhausted)
		}
		var err error
		if base == "" {
			err = unix.Fsetxattr(fd, name, []byte(v), 0)
		} else if hdr.Typeflag == tar.TypeSymlink {
			// The kernel refuses user.* on symlinks; nothing to keep.
			continue
		} else {
			err = unix.Lsetxattr(procPath(fd, base), name, []byte(v), 0)
		}
		if err != nil {
			return fmt.Errorf("layer: xattr %s on %q: %w", name, hdr.Name, err)
		}
	}
	return nil
}

func setTimes(fd int, base string, hdr *tar.Header) error {
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.AccessTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if hdr.AccessTime.IsZero() {
		ts[0] = ts[1]
	}
	if base == "" {
		return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
	}
	return unix.UtimesNanoAt(fd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// procPath names base inside the directory fd without resolving any path
// the layer controls: the kernel's link for fd, then one name.
func procPath(fd int, base string) string {
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + base
}

// removeAllAt removes the directory tree parent/base. os.RemoveAll opens
// every level with O_NOFOLLOW, so symlinks inside are removed, not followed.
func removeAllAt(parent int, base string) error {
	return os.RemoveAll(procPath(parent, base))
}
