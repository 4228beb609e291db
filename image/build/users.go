package build

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// stack is a read-only view of an image's layers for the few lookups the
// builder makes on the host (users, whether a directory exists). Every
// open goes through os.Root, so a symlink in a layer cannot lead outside
// it; a path is looked up layer by layer, top first, as overlayfs would
// (whiteouts and opaque directories end the search).
type stack []string // layer trees, top first

// lstat returns the first layer's file info for rel, or fs.ErrNotExist.
func (s stack) lstat(rel string) (fs.FileInfo, string, error) {
	rel = strings.TrimPrefix(path.Clean("/"+rel), "/")
	for _, dir := range s {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, "", err
		}
		fi, err := root.Lstat(rel)
		hidden := err != nil && s.hiddenBelow(root, rel)
		root.Close()
		switch {
		case err == nil && fi.Mode()&fs.ModeCharDevice != 0 && fi.Sys().(*syscall.Stat_t).Rdev == 0:
			return nil, "", fs.ErrNotExist // whiteout
		case err == nil:
			return fi, dir, nil
		case hidden:
			return nil, "", fs.ErrNotExist
		}
	}
	return nil, "", fs.ErrNotExist
}

// hiddenBelow reports whether a parent of rel in this layer is a whiteout
// or an opaque directory, which hides rel in every lower layer.
func (s stack) hiddenBelow(root *os.Root, rel string) bool {
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

// readFile reads a small regular file of the image (at most 1 MiB).
func (s stack) readFile(rel string) ([]byte, error) {
	fi, dir, err := s.lstat(rel)
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
	f, err := root.Open(strings.TrimPrefix(path.Clean("/"+rel), "/"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// resolveUser turns "name", "uid", "name:group" or "uid:gid" into ids,
// reading the image's /etc/passwd and /etc/group for names. An empty user
// is root. A user without a group gets the passwd entry's group (0 for a
// uid not in passwd).
func (s stack) resolveUser(user string) (uid, gid uint32, err error) {
	if user == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	uid, pgid, err := s.lookup("etc/passwd", u, 2, 3)
	if err != nil {
		return 0, 0, err
	}
	gid = pgid
	if hasGroup {
		if gid, _, err = s.lookup("etc/group", g, 2, -1); err != nil {
			return 0, 0, err
		}
	}
	return uid, gid, nil
}

// lookup finds name (or a number) in a colon-separated database and
// returns fields idField and extraField (-1: none) as numbers.
func (s stack) lookup(db, name string, idField, extraField int) (uint32, uint32, error) {
	num, numErr := strconv.ParseUint(name, 10, 32)
	b, err := s.readFile(db)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) <= idField || (extraField >= 0 && len(f) <= extraField) {
			continue
		}
		id, err := strconv.ParseUint(f[idField], 10, 32)
		if err != nil {
			continue
		}
		if f[0] == name || (numErr == nil && id == num) {
			var extra uint64
			if extraField >= 0 {
				extra, _ = strconv.ParseUint(f[extraField], 10, 32)
			}
			return uint32(id), uint32(extra), nil
		}
	}
	if numErr == nil {
		return uint32(num), 0, nil
	}
	return 0, 0, fmt.Errorf("build: %q is not in the image's /%s: %w", name, db, errdefs.ErrInvalidArgument)
}
