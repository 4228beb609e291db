package build

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
)

// stack is the image's layer trees, top first (image.Stack), with the
// builder's user lookups.
type stack image.Stack

func (s stack) lstat(rel string) (fs.FileInfo, string, error) { return image.Stack(s).Lstat(rel) }

// readFile reads a small regular file of the image (at most 1 MiB).
func (s stack) readFile(rel string) ([]byte, error) { return image.Stack(s).ReadFile(rel, 1<<20) }

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

// LookupUser resolves user (a name or uid, optionally :group) against the
// /etc/passwd and /etc/group of an image whose layer trees are lowers
// (top first), read inside the trees (os.Root), whiteouts honoured: what
// a template's user is in its sandboxes.
func LookupUser(lowers []string, user string) (uid, gid uint32, err error) {
	return stack(lowers).resolveUser(user)
}
