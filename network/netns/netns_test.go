package netns

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestNewDoRemove(t *testing.T) {
	testenv.RequireRoot(t)
	path := filepath.Join(t.TempDir(), "ns")
	if err := New(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Remove(path) })
	if !IsNetNS(path) {
		t.Fatal("not a mounted namespace")
	}
	if err := New(path); err == nil {
		t.Error("New over an existing namespace succeeded")
	}
	own := inode(t, "/proc/self/ns/net")
	if inode(t, path) == own {
		t.Fatal("the new namespace is the process's own")
	}
	var inside uint64
	if err := Do(path, func() error {
		inside = inode(t, selfNS)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inside != inode(t, path) {
		t.Errorf("Do ran in namespace %d, want %d", inside, inode(t, path))
	}
	// No thread of the process is left in the namespace: every thread's
	// namespace is the process's.
	runtime.GC()
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		if ino := inode(t, "/proc/self/task/"+task.Name()+"/ns/net"); ino != own {
			t.Errorf("thread %s is still in namespace %d", task.Name(), ino)
		}
	}

	// A listener made inside answers only inside: loopback there is down
	// until raised, so bring it up, listen, and dial from inside.
	if err := Do(path, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}); err != nil {
		t.Fatal(err)
	}
	l, err := Listen(context.Background(), path, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Write([]byte("inside"))
			c.Close()
		}
	}()
	c, err := Dialer(path)(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "inside" {
		t.Errorf("read %q", b)
	}
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		c.Close()
		// Only a failure here would prove isolation if the host had the same
		// port free; an accepted connection proves the listener leaked.
		t.Error("the namespace's listener is reachable from the host namespace")
	}
	if _, err := Dialer(path)(context.Background(), "tcp", "localhost:80"); err == nil {
		t.Error("Dialer accepted a name")
	}

	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("path still there: %v", err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}
