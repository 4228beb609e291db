package image

import (
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Stack is a read-only view of an image's layer trees (top first, as
// Image.LowerDirs returns them) for the few lookups the host makes in an
// image without mounting it: users for a build step, the files the runtime
// adds to a sandbox's root. Every open goes through os.Root, so a symlink
// in a layer cannot lead outside it; a path is looked up layer by layer,
// top first, as overlayfs would (whiteouts and opaque directories end the
// search). A symlink is returned as itself, never followed across layers.
type Stack []string

// Lstat returns the topmost layer's file info for rel and that layer's
// tree, or fs.ErrNotExist.
func (s Stack) Lstat(rel string) (fs.FileInfo, string, error) {
	rel = clean(rel)
	for _, dir := range s {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, "", err
		}
		fi, err := root.Lstat(rel)
		hidden := err != nil && hiddenBelow(root, rel)
		root.Close()
		switch {
		case err == nil && IsWhiteout(fi):
			return nil, "", fs.ErrNotExist
		case err == nil:
			return fi, dir, nil
		case hidden:
			return nil, "", fs.ErrNotExist
		}
	}
	return nil, "", fs.ErrNotExist
}

// IsWhiteout reports whether fi is an overlayfs whiteout (a 0:0 character
// device), as layer.Apply writes them.
func IsWhiteout(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return fi.Mode()&fs.ModeCharDevice != 0 && ok && st.Rdev == 0
}

func clean(rel string) string { return strings.TrimPrefix(path.Clean("/"+rel), "/") }

// hiddenBelow reports whether a parent of rel in this layer is a whiteout
// or an opaque directory, which hides rel in every lower layer.
func hiddenBelow(root *os.Root, rel string) bool {
	p := ""
	for _, c := range strings.Split(path.Dir(rel), "/") {
		if c == "." {
			break
		}
		p = path.Join(p, c)
		fi, err := root.Lstat(p)
		if err != nil {
			return false
		}
		if fi.Mode()&fs.ModeCharDevice != 0 {
			return true
		}
		if fi.IsDir() && opaque(root.Name()+"/"+p) {
			return true
		}
	}
	return false
}

func opaque(p string) bool {
	b := make([]byte, 4)
	n, err := unix.Lgetxattr(p, "trusted.overlay.opaque", b)
	return err == nil && n == 1 && b[0] == 'y'
}

// ReadFile reads a regular file of the image, at most max bytes (a longer
// file is cut). A symlink or anything else that is not a regular file
// reads as fs.ErrNotExist.
func (s Stack) ReadFile(rel string, max int64) ([]byte, error) {
	fi, dir, err := s.Lstat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(clean(rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}
