package oci

import (
	"fmt"
	"os"
	goruntime "runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// An image's layer trees belong to host ids as the image wrote them (0 for
// root's files), and every sandbox must see them as its own: the image's
// root as the sandbox's root. The daemon does that itself with id-mapped
// mounts (mount_setattr MOUNT_ATTR_IDMAP), whatever the OCI runtime: crun
// could, runc 1.1 ignores the spec's idmap options, and runsc reads the
// root through its gofer. An id-mapped mount needs a user namespace with
// the sandbox's mapping to take it from; usernsCache keeps one per id
// range, since making one costs a process.

// usernsCache holds a user namespace (an open /proc/<pid>/ns/user) per id
// range base, for the life of the process. A namespace whose maker has
// exited lives on while a descriptor or a mount refers to it, and two
// namespaces with the same mapping map ids the same way.
type usernsCache struct {
	mu  sync.Mutex
	fds map[uint32]int // range base -> namespace fd; under mu
}

// get returns the namespace of ids' mapping (0 -> base, IDRangeSize ids).
// The descriptor belongs to the cache: never close it.
func (c *usernsCache) get(ids IDRange) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fd, ok := c.fds[ids.Base]; ok {
		return fd, nil
	}
	fd, err := newUserns(ids)
	if err != nil {
		return -1, err
	}
	if c.fds == nil {
		c.fds = map[uint32]int{}
	}
	c.fds[ids.Base] = fd
	return fd, nil
}

// newUserns makes a user namespace with ids' mapping. Go cannot fork
// without exec, so a child is started in a new user namespace under
// ptrace: it stops right after its execve, before running any code of the
// program (this process's own executable, never run), the namespace is
// opened through /proc, and the child is killed. The thread stays locked:
// the tracer of a ptraced child is a thread, not the process.
func newUserns(ids IDRange) (int, error) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(ids.Base), Size: int(ids.Size)}}
	p, err := os.StartProcess("/proc/self/exe", []string{"sandlot-userns"}, &os.ProcAttr{
		Env: []string{},
		Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m, Ptrace: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return -1, fmt.Errorf("user namespace for ids %d: %w", ids.Base, err)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", p.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	p.Kill()
	p.Wait()
	if err != nil {
		return -1, fmt.Errorf("user namespace for ids %d: %w", ids.Base, err)
	}
	return fd, nil
}

// idmappedClone returns a detached, read-only, nosuid, nodev bind mount of
// dir whose owners are shifted into the namespace userns: a file of host
// uid n shows as uid n of that namespace (host base+n). The mount exists
// only as the returned descriptor until something attaches it or uses it
// as an overlayfs layer.
func idmappedClone(dir string, userns int) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("layer %s: open_tree: %w", dir, err)
	}
	attr := &unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(userns),
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("layer %s: id-mapped mount (the file system must support them): %w", dir, err)
	}
	return fd, nil
}
