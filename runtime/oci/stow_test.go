package oci

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/runtime"
)

// stowCode counts in memory, as counterSpec's process does, and each
// turn checks its files (the 1 MiB it wrote, the image file it deleted:
// a whiteout) and writes the count to a file it holds open; a check that
// fails writes -1 as the count.
const stowCode = `import os, time
open('/home/user/kept', 'wb').write(b'k' * (1 << 20))
os.remove('/image-a')
os.mkdir('/home/user/d')
f = open('/home/user/open.txt', 'w+')
n = 0
while True:
    n += 1
    ok = os.path.getsize('/home/user/kept') == 1 << 20 and not os.path.exists('/image-a') and os.path.isdir('/home/user/d')
    f.seek(0); f.write('%09d' % n); f.flush()
    open('/run/sandlot/n.tmp', 'w').write(str(n if ok else -1))
    os.rename('/run/sandlot/n.tmp', '/run/sandlot/n')
    time.sleep(0.02)
`

// TestCheckpointStowsLayer: under runsc, a checkpoint of a sandbox on an
// image moves its writable layer to disk: no tmpfs of it stays mounted
// (its pages freed) and the bundle holds its files (the whiteout of the
// image file it deleted as a char device 0/0). The restore puts it back:
// the process goes on from its count, finds its files as they were and
// writes on through the file it held open into the new layer.
func TestCheckpointStowsLayer(t *testing.T) {
	r := newRuntime(t, KindRunsc)
	a, _ := imageLayers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := runtime.NewID()
	sp := counterSpec(id)
	sp.Args = []string{"/usr/bin/python3", "-c", stowCode}
	sp.Root = &runtime.Root{Layers: a}
	sp.User = &runtime.User{} // root inside, to delete an image file
	if err := r.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Delete(context.Background(), id) })
	waitCount(t, r, id, 5, -1)
	if err := r.Checkpoint(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	saved := waitCount(t, r, id, 0, -1)
	if isMountPoint(r.rootDir(id)) || isMountPoint(filepath.Join(r.rootDir(id), "root")) {
		t.Fatal("the writable layer's tmpfs is still mounted while checkpointed")
	}
	// Nor in any other mount namespace: its pages are freed only when no
	// namespace keeps the tmpfs.
	procs, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, mi := range procs {
		b, _ := os.ReadFile(mi)
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], "/roots/"+id) {
				t.Fatalf("%s still mounts %s while checkpointed", mi, f[4])
			}
		}
	}
	disk := filepath.Join(r.bundle(id), stowedDir)
	if fi, err := os.Stat(filepath.Join(disk, "home/user/kept")); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("the stowed layer's file: %v %v", fi, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(disk, "image-a"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Fatalf("the stowed whiteout: mode %#o rdev %d %v", st.Mode, st.Rdev, err)
	}
	if err := r.Restore(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	if next := waitCount(t, r, id, 0, saved); next <= saved {
		t.Fatalf("counter %d after the restore, want above %d (or its files were not as it left them: -1)", next, saved)
	}
	if _, err := os.Lstat(disk); !os.IsNotExist(err) {
		t.Errorf("the stowed copy stays after the restore: %v", err)
	}
	// The file the process held open is the new layer's.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(r.rootDir(id), "upper/home/user/open.txt"))
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > saved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the open file in the restored layer reads %q, want a count above %d", b, saved)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
