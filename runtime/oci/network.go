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
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/openat2"
	"github.com/sandlot/sandlot/runtime"
)

// Where a sandbox with a network (runtime.Spec.Network) finds its name
// server and its trust store. CABundle is the system bundle Debian's
// OpenSSL, curl, Python's ssl and Go read; the runtimes with stores of
// their own are pointed at it through the environment (provider/local).
const (
	ResolvConfPath = "/etc/resolv.conf"
	CABundlePath   = "/etc/ssl/certs/ca-certificates.crt"
)

// netFilesDir holds, in the share, the files that network sandboxes
// bind-mount read-only: resolv.conf (one per content, shared) and each
// sandbox's CA bundle (the root's bundle plus its own CA). They live in the
// share rather than the bundle so the sandbox's mount table names neither
// the state dir nor the sandbox (runtime.md, "Share"); they are named by
// their content.
const netFilesDir = "net"

// caFilePrefix starts a CA bundle's name; Delete removes the bundle of the
// sandbox it deletes (each is unique to its sandbox: the CA is).
const caFilePrefix = "ca-"

// checkNetwork validates a spec's network (nil: none) before anything is
// built.
func checkNetwork(n *runtime.Network) error {
	if n == nil {
		return nil
	}
	if !filepath.IsAbs(n.Path) || filepath.Clean(n.Path) != n.Path {
		return fmt.Errorf("network namespace path %q: %w", n.Path, errdefs.ErrInvalidArgument)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(n.Path, &st); err != nil || st.Type != unix.NSFS_MAGIC {
		return fmt.Errorf("%s is not a mounted network namespace: %w", n.Path, errdefs.ErrInvalidArgument)
	}
	return nil
}

// networkMounts writes the network's files into the share and returns
// their mounts.
func (r *Runtime) networkMounts(rootfs string, n *runtime.Network) ([]specs.Mount, error) {
	dir := filepath.Join(r.share, netFilesDir)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("network files: %w", err)
	}
	ro := []string{"bind", "ro", "nosuid", "nodev", "noexec"}
	resolv, err := shareFile(dir, "resolv-", n.ResolvConf)
	if err != nil {
		return nil, err
	}
	mounts := []specs.Mount{{Destination: ResolvConfPath, Type: "bind", Source: resolv, Options: ro}}
	if len(n.CACerts) > 0 {
		base, err := readInRoot(rootfs, CABundlePath, 16<<20)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("trust store of the root: %w", err)
		}
		if len(base) > 0 && base[len(base)-1] != '\n' {
			base = append(base, '\n')
		}
		ca, err := shareFile(dir, caFilePrefix, append(base, n.CACerts...))
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, specs.Mount{Destination: CABundlePath, Type: "bind", Source: ca, Options: ro})
	}
	for _, f := range n.Files {
		if !filepath.IsAbs(f.Path) || filepath.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("network file %q: not an absolute clean path: %w", f.Path, errdefs.ErrInvalidArgument)
		}
		if f.When != "" && !dirInRoot(rootfs, f.When) {
			continue
		}
		p, err := shareFile(dir, "file-", f.Data)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, specs.Mount{Destination: f.Path, Type: "bind", Source: p, Options: ro})
	}
	return mounts, nil
}

// applyNetwork makes the bundle of a sandbox with network n (nil: none)
// join it: the namespace, resolv.conf and a trust store built from the
// root's own bundle (the image's, when the root is an image).
func (r *Runtime) applyNetwork(sp *specs.Spec, d *driver, rootfs string, n *runtime.Network) error {
	if n == nil {
		return nil
	}
	mounts, err := r.networkMounts(rootfs, n)
	if err != nil {
		return err
	}
	joinNetwork(sp, d.kind, n.Path, mounts)
	d.network = n.Path
	return nil
}

// joinNetwork makes sp join the namespace at path and adds mounts.
//
// A sysfs instance belongs to the network namespace it is mounted from,
// and the kernel refuses to mount one from a user namespace that does not
// own that network namespace, which is the case here (the host built it;
// that is what keeps the sandbox's root from changing it). So crun and
// runc get the host's /sys, read-only, with the parts that would name the
// host's devices and other sandboxes (network interfaces, cgroups) masked.
// gVisor's /sys is its own.
func joinNetwork(sp *specs.Spec, kind, path string, mounts []specs.Mount) {
	for i, ns := range sp.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			sp.Linux.Namespaces[i].Path = path
		}
	}
	if kind != KindRunsc {
		for i, m := range sp.Mounts {
			if m.Destination == "/sys" && m.Type == "sysfs" {
				sp.Mounts[i] = specs.Mount{Destination: "/sys", Type: "bind", Source: "/sys", Options: []string{"rbind", "ro", "nosuid", "noexec", "nodev"}}
			}
		}
		masked := append(slices.Clone(sp.Linux.MaskedPaths), sysMasked...)
		sp.Linux.MaskedPaths = append(masked, sysNetDirs(sysClassNet)...)
	}
	sp.Mounts = append(sp.Mounts, mounts...)
}

// sysMasked are the parts of the host's /sys a network sandbox on crun or
// runc does not see (joinNetwork).
var sysMasked = []string{"/sys/class/net", "/sys/devices/virtual/net", "/sys/fs/cgroup", "/sys/class/block", "/sys/block"}

// sysClassNet lists the network interfaces of the host's /sys.
var sysClassNet = "/sys/class/net"

// sysNetDirs returns the directories of /sys/devices that hold the
// interfaces listed in classNet and are not under
// /sys/devices/virtual/net (masked whole): a network card's
// <device>/net, with its name, MAC address and counters. They are read
// at each create, so a card that appears later is hidden from the
// sandboxes created after it. Reading links only, no file of the
// devices: a few microseconds per interface.
func sysNetDirs(classNet string) []string {
	ents, err := os.ReadDir(classNet)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(classNet, e.Name()))
		if err != nil {
			continue
		}
		dir := filepath.Dir(filepath.Join(classNet, link)) // <device>/net
		if !strings.HasPrefix(dir, "/sys/devices/") || strings.HasPrefix(dir+"/", "/sys/devices/virtual/net/") || slices.Contains(out, dir) {
			continue
		}
		out = append(out, dir)
	}
	return out
}

// shareFile writes data to dir/<prefix><digest> unless it is there, and
// returns the path. Concurrent writers of the same content are safe: each
// writes a temporary file and renames it into place.
func shareFile(dir, prefix string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	p := filepath.Join(dir, prefix+hex.EncodeToString(sum[:16]))
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	f, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return "", fmt.Errorf("share file: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		return "", fmt.Errorf("share file: %w", err)
	}
	return p, nil
}

// readInRoot reads name inside root as the sandbox would resolve it:
// symlinks stay inside root (a root built from an image is not ours).
func readInRoot(root, name string, limit int64) ([]byte, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rfd)
	fd, err := openat2.Open(rfd, strings.TrimPrefix(name, "/"), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		// The last component may be a link (Debian's is not, but an
		// image's may be): follow it, still inside root.
		if !errors.Is(err, unix.ELOOP) {
			return nil, err
		}
		fd, err = openat2.Open(rfd, strings.TrimPrefix(name, "/"), &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		if err != nil {
			return nil, err
		}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	return b, nil
}
