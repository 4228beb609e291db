// Package netns creates network namespaces kept alive by a bind mount (so
// an OCI runtime can join one by path, and the daemon finds it again after
// a restart), removes them, and runs code, listeners and dials inside one.
//
// A namespace is a property of an OS thread, not of a goroutine: every
// function here switches a locked thread of a fresh goroutine and switches
// it back, and a thread that cannot be switched back is thrown away (the
// goroutine exits still locked), so no other goroutine ever runs in a
// namespace it did not ask for.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

const selfNS = "/proc/thread-self/ns/net"

// New creates a network namespace and bind-mounts it at path (a new file;
// its directory must exist). The namespace holds only a loopback device,
// down.
func New(path string) (err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(path)
		}
	}()
	return onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare netns: %w", err)
		}
		if err := unix.Mount(selfNS, path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind netns at %s: %w", path, err)
		}
		return nil
	})
}

// Remove unmounts the namespace at path and removes the file. A missing
// path is not an error. The kernel frees the namespace when nothing else
// holds it (a process inside, an open descriptor).
func Remove(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}

// ShareDir makes dir a mount of its own with shared propagation (a bind
// of itself, as iproute2 does with /run/netns), so namespaces mounted in
// it later appear in the mount namespaces copied from this one, such as
// the one crun runs in on hybrid cgroup hosts (runtime/oci), which then
// find a namespace by path. It is idempotent.
func ShareDir(dir string) error {
	if !isMountPoint(dir) {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("netns dir %s: bind: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("netns dir %s: make shared: %w", dir, err)
	}
	return nil
}

// UnshareDir undoes ShareDir. Every namespace mounted in dir goes with it.
func UnshareDir(dir string) error {
	if !isMountPoint(dir) {
		return nil
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns dir %s: unmount: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether dir is the root of a mount.
func isMountPoint(dir string) bool {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return false
	}
	return st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// IsNetNS reports whether path is a mounted network namespace.
func IsNetNS(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// Do runs fn on an OS thread that has joined the namespace at path. An
// empty path runs fn in the caller's namespace, still on a locked thread.
// fn must not start goroutines that expect to be in the namespace.
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open netns: %w", err)
	}
	defer target.Close()
	return onThread(func() error {
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("join netns %s: %w", path, err)
		}
		return fn()
	})
}

// onThread runs fn on a locked thread of a new goroutine, remembering the
// thread's namespace first and restoring it after. If the restore fails
// the thread is left locked, and the runtime ends it with the goroutine.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(selfNS)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer orig.Close()
		err = fn()
		if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
			errc <- errors.Join(err, fmt.Errorf("restore netns: %w", rerr))
			return // thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// ListenConfig returns a net.ListenConfig whose sockets set IP_FREEBIND,
// so a listener can bind an address before any interface carries it (the
// sandbox gateway exists only while a sandbox has a network).
func ListenConfig() net.ListenConfig {
	return net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
}

// Listen opens a stream listener (IP_FREEBIND) inside the namespace at
// path ("" for the caller's).
func Listen(ctx context.Context, path, network, address string) (net.Listener, error) {
	var l net.Listener
	err := Do(path, func() error {
		lc := ListenConfig()
		var err error
		l, err = lc.Listen(ctx, network, address)
		return err
	})
	return l, err
}

// ListenPacket opens a packet socket (IP_FREEBIND) inside the namespace at
// path ("" for the caller's).
func ListenPacket(ctx context.Context, path, network, address string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := Do(path, func() error {
		lc := ListenConfig()
		var err error
		pc, err = lc.ListenPacket(ctx, network, address)
		return err
	})
	return pc, err
}

// Dialer returns a dial function whose sockets live in the namespace at
// path. address must be an IP literal with a port: a name would be looked
// up by goroutines outside the namespace.
func Dialer(path string) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if net.ParseIP(host) == nil {
			return nil, fmt.Errorf("dial in netns %s: %q is not an IP literal", filepath.Base(path), host)
		}
		var c net.Conn
		err = Do(path, func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, address)
			return err
		})
		return c, err
	}
}
