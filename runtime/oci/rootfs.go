package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Sandbox user. Everything inside runs as this uid/gid.
const (
	UserName = "user"
	UID      = 1000
	GID      = 1000
	HomeDir  = "/home/user"
)

// AgentPath is where the agent binary is mounted, read-only, inside every
// sandbox (see Spec mounts in provider/local).
const AgentPath = "/opt/sandlot/sandlot-agent"

// skeleton is the shared read-only root of every sandbox: empty mount
// points, the usual /usr symlinks and a curated /etc. It is built once per
// process, named by a digest of its content, so sandboxes started by an
// older daemon keep theirs and create only bind-mounts it.
type skeleton struct {
	files []skelEntry
}

type skelEntry struct {
	path string // relative to the root
	kind byte   // 'd' dir, 'f' file, 'l' symlink
	mode os.FileMode
	uid  int
	data string // file content or link target
}

func (s *skeleton) dir(p string, mode os.FileMode, uid int) {
	s.files = append(s.files, skelEntry{path: p, kind: 'd', mode: mode, uid: uid})
}
func (s *skeleton) file(p, data string, mode os.FileMode) {
	s.files = append(s.files, skelEntry{path: p, kind: 'f', mode: mode, data: data})
}
func (s *skeleton) has(p string) bool {
	for _, e := range s.files {
		if e.path == p {
			return true
		}
	}
	return false
}
func (s *skeleton) link(p, target string) {
	s.files = append(s.files, skelEntry{path: p, kind: 'l', data: target})
}

// NoNetworkResolvConf is /etc/resolv.conf in a sandbox without a network
// of its own (a sandbox with one gets its resolver's over it, network.go):
// no name server, so every name fails to resolve, and a note saying why
// to whoever reads the file to find out.
const NoNetworkResolvConf = "# This sandbox has no network: it reaches nothing outside itself (loopback only),\n" +
	"# so no name resolves. Its network is what the sandlot daemon's operator allows;\n" +
	"# ask for one when the sandbox is created (docs/network.md).\n"

// hostUsrLinks are the top-level names that a merged-/usr host links into
// /usr. Only those whose /usr target exists are created.
var hostUsrLinks = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// newSkeleton describes the root. hostRoot is "/" except in tests.
func newSkeleton(hostRoot string) (*skeleton, error) {
	s := &skeleton{}
	for _, d := range []string{"usr", "proc", "dev", "sys", "etc", "run", "opt", "opt/sandlot", "home", "var", "mnt"} {
		s.dir(d, 0o755, 0)
	}
	s.dir("root", 0o700, 0)
	s.dir("tmp", 0o1777, 0)
	s.dir("run/sandlot", 0o755, 0)
	s.dir("home/user", 0o755, 0) // a mount point: the sandbox's own tmpfs goes here
	s.file(strings.TrimPrefix(AgentPath, "/"), "", 0o555)
	s.link("var/tmp", "/tmp")
	for _, n := range hostUsrLinks {
		if fi, err := os.Stat(filepath.Join(hostRoot, "usr", n)); err == nil && fi.IsDir() {
			s.link(n, "usr/"+n)
		}
	}
	s.file("etc/passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\n"+
		fmt.Sprintf("%s:x:%d:%d:sandbox user:%s:/bin/bash\n", UserName, UID, GID, HomeDir)+
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", 0o644)
	s.file("etc/group", "root:x:0:\n"+fmt.Sprintf("%s:x:%d:\n", UserName, GID)+"nogroup:x:65534:\n", 0o644)
	s.file("etc/hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n", 0o644)
	s.file("etc/hostname", "sandbox\n", 0o644)
	s.file("etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n", 0o644)
	s.file("etc/resolv.conf", NoNetworkResolvConf, 0o644)
	s.file("etc/machine-id", "", 0o444) // the mount point of the sandbox's own (identity.go)
	s.link("etc/localtime", "/usr/share/zoneinfo/Etc/UTC")
	s.file("etc/timezone", "Etc/UTC\n", 0o644)
	s.file("etc/profile", hostProfile, 0o644)
	if _, err := os.Stat(filepath.Join(hostRoot, "usr/lib/os-release")); err == nil {
		s.link("etc/os-release", "../usr/lib/os-release")
	}
	// Debian's matplotlib reads its defaults from /etc/matplotlibrc only.
	const mplrc = "/usr/share/matplotlib/mpl-data/matplotlibrc"
	if _, err := os.Stat(filepath.Join(hostRoot, mplrc)); err == nil {
		s.link("etc/matplotlibrc", mplrc)
	}
	s.dir("etc/fonts", 0o755, 0)
	s.file("etc/fonts/fonts.conf", fontsConf, 0o644)
	if err := s.addCerts(hostRoot); err != nil {
		return nil, err
	}
	if !s.has("etc/ssl/certs/ca-certificates.crt") {
		// The mount point of a network sandbox's trust store (network.go)
		// must exist in the read-only root.
		for _, d := range []string{"etc/ssl", "etc/ssl/certs"} {
			if !s.has(d) {
				s.dir(d, 0o755, 0)
			}
		}
		s.file("etc/ssl/certs/ca-certificates.crt", "", 0o644)
	}
	s.addAlternatives(hostRoot)
	// The loader cache only lists libraries under /usr; without it every
	// dlopen walks the default directories.
	if b, err := os.ReadFile(filepath.Join(hostRoot, "etc/ld.so.cache")); err == nil {
		s.file("etc/ld.so.cache", string(b), 0o644)
	}
	return s, nil
}

// addCerts copies the host's CA certificates (/etc/ssl/certs: the bundle,
// the per-CA links into /usr/share/ca-certificates and their hash links)
// and nothing else of the host's /etc.
func (s *skeleton) addCerts(hostRoot string) error {
	src := filepath.Join(hostRoot, "etc/ssl/certs")
	ents, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	s.dir("etc/ssl", 0o755, 0)
	s.dir("etc/ssl/certs", 0o755, 0)
	for _, e := range ents {
		p := filepath.Join(src, e.Name())
		rel := "etc/ssl/certs/" + e.Name()
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			s.link(rel, t)
		case e.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s.file(rel, string(b), 0o644)
		}
	}
	// OpenSSL's default directory links here (/usr/lib/ssl/certs).
	s.link("etc/ssl/cert.pem", "certs/ca-certificates.crt")
	return nil
}

// addAlternatives recreates the Debian alternatives links (/usr/bin/awk ->
// /etc/alternatives/awk -> /usr/bin/mawk) whose target lies under /usr.
// They are only pointers into the read-only /usr.
func (s *skeleton) addAlternatives(hostRoot string) {
	src := filepath.Join(hostRoot, "etc/alternatives")
	ents, err := os.ReadDir(src)
	if err != nil {
		return
	}
	s.dir("etc/alternatives", 0o755, 0)
	for _, e := range ents {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		t, err := os.Readlink(filepath.Join(src, e.Name()))
		if err != nil || !strings.HasPrefix(t, "/usr/") {
			continue
		}
		s.link("etc/alternatives/"+e.Name(), t)
	}
}

// digest names the skeleton by its content.
func (s *skeleton) digest() string {
	h := sha256.New()
	ents := append([]skelEntry(nil), s.files...)
	sort.SliceStable(ents, func(i, j int) bool { return ents[i].path < ents[j].path })
	for _, e := range ents {
		fmt.Fprintf(h, "%s\x00%c\x00%o\x00%d\x00%d\x00", e.path, e.kind, e.mode, e.uid, len(e.data))
		io.WriteString(h, e.data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// materialize writes the skeleton under dir/<digest> unless it is there,
// and returns that path. Concurrent callers are safe: each builds in a
// private temporary directory and renames it into place.
func (s *skeleton) materialize(dir string) (string, error) {
	final := filepath.Join(dir, s.digest())
	// A skeleton appears whole (renamed into place) or not at all.
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	for _, e := range s.files {
		p := filepath.Join(tmp, e.path)
		var err error
		switch e.kind {
		case 'd':
			if err = os.Mkdir(p, e.mode); err == nil {
				err = os.Chmod(p, e.mode) // umask
			}
			if err == nil && e.uid != 0 {
				err = os.Lchown(p, e.uid, e.uid)
			}
		case 'f':
			if err = os.WriteFile(p, []byte(e.data), e.mode); err == nil {
				err = os.Chmod(p, e.mode)
			}
		case 'l':
			err = os.Symlink(e.data, p)
		}
		if err != nil {
			return "", fmt.Errorf("rootfs skeleton: %w", err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(final); serr == nil {
			return final, nil // another process won the race
		}
		return "", fmt.Errorf("rootfs skeleton: %w", err)
	}
	return final, nil
}

// fontsConf is a minimal fontconfig setup (matplotlib, PIL): the fonts
// under /usr and a cache in the writable home.
const fontsConf = `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir>/usr/share/fonts</dir>
  <dir>/usr/local/share/fonts</dir>
  <cachedir prefix="xdg">fontconfig</cachedir>
</fontconfig>
`

// hostProfile is the host template's /etc/profile, read by login shells
// (E2B's commands run in one): the host template has no root, so sudo,
// which E2B's images have, is missing with a reason.
const hostProfile = `command_not_found_handle() {
  if [ "$1" = sudo ]; then
    echo "sudo: not available in this sandbox: its template (host) has no root; use an image template (default), where the user has sudo" >&2
  else
    echo "bash: $1: command not found" >&2
  fi
  return 127
}
`
