package build

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/dockerignore"
	"github.com/sandlot/sandlot/image/recipe"
)

// copyPlan is what one COPY step puts where.
type copyPlan struct {
	root     *os.Root // the build context
	ignore   *dockerignore.Matcher
	pending  []pendingDir // ignored directories walked into, not yet written
	uid, gid int
	mode     uint32 // 0: keep the source's
	epoch    time.Time
	maxBytes int64
	written  int64
}

// writeCopy writes the layer tarball of a COPY step: each source (a path
// or pattern inside the build context) under dest, by Docker's rules: a
// directory source copies its contents; with several sources or a dest
// ending in / (or an existing directory), dest is a directory. The context
// is read through os.Root: nothing outside it is reachable, and symlinks
// in it are copied as symlinks, never followed.
func (b *Builder) writeCopy(w io.Writer, st recipe.Step, opt Options, workdir string, img stack) error {
	ctxDir := opt.ContextDir
	if ctxDir == "" {
		return fmt.Errorf("build: line %d: COPY needs a build context: %w", st.Line, errdefs.ErrInvalidArgument)
	}
	root, err := os.OpenRoot(ctxDir)
	if err != nil {
		return fmt.Errorf("build: context: %w", err)
	}
	defer root.Close()
	uid, gid, err := img.resolveUser(st.User)
	if err != nil {
		return fmt.Errorf("build: line %d: COPY --chown: %w", st.Line, err)
	}
	p := &copyPlan{root: root, uid: int(uid), gid: int(gid), mode: st.Mode, epoch: b.cfg.Epoch, maxBytes: b.cfg.MaxCopyBytes}
	if opt.dockerIgnore {
		if p.ignore, err = dockerignore.Load(root.FS()); err != nil {
			return fmt.Errorf("build: line %d: COPY: %w", st.Line, err)
		}
	}

	dest := st.Dest
	if !path.IsAbs(dest) {
		dest = path.Join(workdir, dest)
	}
	var srcs []string
	for _, s := range st.Src {
		matches, err := p.glob(s)
		if err != nil {
			return fmt.Errorf("build: line %d: COPY %s: %w", st.Line, s, err)
		}
		srcs = append(srcs, matches...)
	}
	destDir := strings.HasSuffix(st.Dest, "/") || len(srcs) > 1
	if fi, _, err := img.lstat(dest); err == nil && fi.IsDir() {
		destDir = true
	}
	tw := tar.NewWriter(w)
	if err := parents(tw, img, path.Join(dest, "x"), p.epoch); err != nil {
		return err
	}
	for _, src := range srcs {
		fi, err := root.Lstat(src)
		if err != nil {
			return fmt.Errorf("build: line %d: COPY %s: %v: %w", st.Line, src, err, errdefs.ErrInvalidArgument)
		}
		target := dest
		switch {
		case fi.IsDir():
			// The contents go to dest, never the directory itself (its
			// mode is the context's business: an uploaded context's root
			// is 0700): an existing dest keeps its metadata, a new one is
			// 0755 (or --chmod's) of the --chown owner.
			if dfi, _, err := img.lstat(dest); err == nil && dfi.IsDir() {
				err = parents(tw, img, path.Join(dest, "x"), p.epoch)
			} else {
				err = p.newDir(tw, dest)
			}
			if err != nil {
				return err
			}
			if err := p.children(tw, src, dest); err != nil {
				return fmt.Errorf("build: line %d: COPY %s: %w", st.Line, src, err)
			}
			continue
		case destDir:
			target = path.Join(dest, path.Base(src))
		}
		if err := p.tree(tw, src, target, fi); err != nil {
			return fmt.Errorf("build: line %d: COPY %s: %w", st.Line, src, err)
		}
	}
	return tw.Close()
}

// newDir writes the directory a directory's contents are copied into
// (an absolute image path) when the image has none.
func (p *copyPlan) newDir(tw *tar.Writer, dir string) error {
	name := strings.TrimPrefix(dir, "/")
	if name == "" {
		return nil
	}
	mt := p.epoch
	if mt.IsZero() {
		mt = time.Now().Truncate(time.Second)
	}
	h := &tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: p.uid, Gid: p.gid, ModTime: mt.UTC(), Format: tar.FormatPAX}
	if p.mode != 0 {
		h.Mode = int64(p.mode)
	}
	return tw.WriteHeader(h)
}

// glob expands a context-relative pattern. A source may not climb out of
// the context; a leading / means the context's root, as in Docker.
func (p *copyPlan) glob(pattern string) ([]string, error) {
	for _, c := range strings.Split(pattern, "/") {
		if c == ".." {
			return nil, fmt.Errorf("source leaves the build context: %w", errdefs.ErrInvalidArgument)
		}
	}
	clean := strings.TrimPrefix(path.Clean("/"+pattern), "/")
	if clean == "" {
		clean = "."
	}
	if !strings.ContainsAny(clean, "*?[") {
		if p.excluded(clean) {
			return nil, fmt.Errorf("not found: the build context's %s excludes it: %w", dockerignore.File, errdefs.ErrInvalidArgument)
		}
		return []string{clean}, nil
	}
	all, err := fs.Glob(p.root.FS(), clean)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)
	}
	var m []string
	for _, f := range all {
		if !p.excluded(f) {
			m = append(m, f)
		}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("no source files were specified: %w", errdefs.ErrInvalidArgument)
	}
	sort.Strings(m)
	return m, nil
}

// excluded reports whether the source rel is out of COPY's sight: the
// .dockerignore names it, and it is no directory in which a `!` pattern
// may take back a path (tree walks those).
func (p *copyPlan) excluded(rel string) bool {
	if !p.ignore.Ignored(rel) {
		return false
	}
	if !p.ignore.Reincludes() {
		return true
	}
	fi, err := p.root.Lstat(rel)
	return err != nil || !fi.IsDir()
}

// pendingDir is an ignored directory a walk went into because a `!`
// pattern may take back something inside it: its entry is written before
// the first such path, and never when there is none.
type pendingDir struct {
	src, target string
	fi          fs.FileInfo
}

// tree writes src (a context path) at target (an absolute image path),
// leaving out what the context's .dockerignore names.
func (p *copyPlan) tree(tw *tar.Writer, src, target string, fi fs.FileInfo) error {
	if p.ignore.Ignored(src) {
		if !fi.IsDir() || !p.ignore.Reincludes() {
			return nil
		}
		p.pending = append(p.pending, pendingDir{src, target, fi})
		err := p.children(tw, src, target)
		if n := len(p.pending); n > 0 && p.pending[n-1].src == src {
			p.pending = p.pending[:n-1] // nothing inside was taken back
		}
		return err
	}
	for _, d := range p.pending {
		if err := p.entry(tw, d.src, d.target, d.fi); err != nil {
			return err
		}
	}
	p.pending = p.pending[:0]
	if err := p.entry(tw, src, target, fi); err != nil {
		return err
	}
	if !fi.IsDir() {
		return nil
	}
	return p.children(tw, src, target)
}

// children writes the entries inside the context directory src at target.
func (p *copyPlan) children(tw *tar.Writer, src, target string) error {
	ents, err := fs.ReadDir(p.root.FS(), src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		child := path.Join(src, e.Name())
		cfi, err := p.root.Lstat(child)
		if err != nil {
			return err
		}
		if err := p.tree(tw, child, path.Join(target, e.Name()), cfi); err != nil {
			return err
		}
	}
	return nil
}

func (p *copyPlan) entry(tw *tar.Writer, src, target string, fi fs.FileInfo) error {
	name := strings.TrimPrefix(target, "/")
	if name == "" {
		return nil // copying a directory's contents to /: no entry for / itself
	}
	mt := fi.ModTime()
	if !p.epoch.IsZero() && mt.After(p.epoch) {
		mt = p.epoch
	}
	h := &tar.Header{Name: name, Uid: p.uid, Gid: p.gid, ModTime: mt.UTC(), Format: tar.FormatPAX, Mode: int64(fi.Mode().Perm())}
	if p.mode != 0 {
		h.Mode = int64(p.mode)
	}
	switch {
	case fi.IsDir():
		h.Typeflag, h.Name = tar.TypeDir, name+"/"
	case fi.Mode()&fs.ModeSymlink != 0:
		l, err := p.root.Readlink(src)
		if err != nil {
			return err
		}
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, l, 0o777
	case fi.Mode().IsRegular():
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
	default:
		return nil // devices, fifos and sockets of the context are not copied
	}
	if h.Typeflag == tar.TypeReg {
		if p.maxBytes > 0 && p.written+h.Size > p.maxBytes {
			return fmt.Errorf("more than %d bytes: %w", p.maxBytes, errdefs.ErrResourceExhausted)
		}
		f, err := p.root.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		n, err := io.Copy(tw, io.LimitReader(f, h.Size))
		p.written += n
		if err == nil && n != h.Size {
			err = fmt.Errorf("%s changed while copied", src)
		}
		return err
	}
	return tw.WriteHeader(h)
}

// mkdirTar writes a layer holding dir and its parents.
func mkdirTar(w io.Writer, img stack, dir string, epoch time.Time) error {
	tw := tar.NewWriter(w)
	if err := parents(tw, img, path.Join(dir, "x"), epoch); err != nil {
		return err
	}
	return tw.Close()
}

// parents writes a directory entry for each parent of target (an absolute
// image path). Layers are unpacked each on its own, where a parent missing
// from the tarball would be created as root's 0755 and, once stacked, hide
// the lower layer's owner and mode: so a parent the image has is written
// with its metadata, a new one as 0755 root.
func parents(tw *tar.Writer, img stack, target string, epoch time.Time) error {
	p := ""
	dirs := strings.Split(strings.Trim(path.Dir(target), "/"), "/")
	for _, c := range dirs {
		if c == "" || c == "." {
			continue
		}
		p = path.Join(p, c)
		h := &tar.Header{Name: p + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}
		if fi, _, err := img.lstat(p); err == nil && fi.IsDir() {
			st := fi.Sys().(*syscall.Stat_t)
			h.Mode, h.Uid, h.Gid, h.ModTime = int64(st.Mode&0o7777), int(st.Uid), int(st.Gid), fi.ModTime()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	return nil
}
