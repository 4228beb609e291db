package oci

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/runtimetest"
)

// imageLayers returns two images that share the Debian base and differ in
// a top layer each (/image-a or /image-b), as layer trees top first.
func imageLayers(t testing.TB) (a, b []string) {
	t.Helper()
	_, img := debiantest.Default(t)
	base := img.LowerDirs()
	top := func(name string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return append([]string{top("image-a")}, base...), append([]string{top("image-b")}, base...)
}

// startImageProbe starts the probe on an image root, as user (nil: the
// sandbox user).
func startImageProbe(t *testing.T, r *Runtime, layers []string, user *runtime.User, disk int64) (string, *probeConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := runtime.NewID()
	sp := probeSpec(t, r, id)
	sp.Root = &runtime.Root{Layers: layers}
	sp.User = user
	if disk > 0 {
		sp.Limits.DiskBytes = disk
	}
	if err := r.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Delete(context.Background(), id); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
	})
	return id, dialProbe(t, ctx, r, id)
}

// TestImageRoot: a sandbox of image A sees A's files, never B's nor the
// host's /usr/local; the image's root files are root's inside; the
// sandbox user can write its home and /tmp but not the image's /usr.
func TestImageRoot(t *testing.T) {
	a, b := imageLayers(t)
	hostOnly := hostUsrLocalEntry(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			port := runtimetest.ListenLoopback(t)
			_, pa := startImageProbe(t, r, a, nil, 0)
			_, pb := startImageProbe(t, r, b, nil, 0)
			checks := []struct {
				p          *probeConn
				name, cmd  string
				want       string
				wantFailed bool
			}{
				{pa, "own layer", "cat /image-a", "image-a\n", false},
				{pb, "own layer b", "cat /image-b", "image-b\n", false},
				{pa, "other image's layer", "cat /image-b", "", true},
				{pb, "other image's layer b", "cat /image-a", "", true},
				{pa, "host /usr/local", "ls -d " + hostOnly, "", true},
				{pa, "image's own passwd", "grep -c '^_apt:' /etc/passwd", "1\n", false},
				{pa, "owners mapped", "stat -c %u:%g / /usr/bin/python3 /etc/passwd", "0:0\n0:0\n0:0\n", false},
				{pa, "user", "id -u; id -g", "1000\n1000\n", false},
				{pa, "home", "echo hi > ~/f && cat ~/f && stat -c %u ~", "hi\n1000\n", false},
				{pa, "tmp", "echo hi > /tmp/f && cat /tmp/f", "hi\n", false},
				{pa, "python", runtimetest.Py("import numpy; print(numpy.arange(4).sum())"), "6\n", false},
				{pa, "write /usr as user", "touch /usr/x", "", true},
				{pa, "write / as user", "mkdir /x", "", true},
				{pa, "chown as user", "touch /tmp/c && chown 0 /tmp/c", "", true},
			}
			for _, c := range checks {
				got := c.p.sh(t, c.cmd)
				if c.wantFailed {
					if got.Code == 0 {
						t.Errorf("%s: %q succeeded: %s", c.name, c.cmd, got.Out)
					}
					continue
				}
				if got.Code != 0 || got.Out != c.want {
					t.Errorf("%s: %q = %q (exit %d), want %q", c.name, c.cmd, got.Out, got.Code, c.want)
				}
			}
			// The walls hold on an image root too. Its /var is the
			// image's, readable, not the host's.
			for _, tc := range runtimetest.Hostile(port) {
				if tc.Name == "read host /var" {
					continue
				}
				if got := pa.sh(t, tc.Cmd); got.Code == 0 {
					t.Errorf("%s: %q succeeded on an image root: %s", tc.Name, tc.Cmd, got.Out)
				}
			}
		})
	}
}

// hostUsrLocalEntry names something in the host's /usr/local that the
// Debian image does not have (the test fails if there is none to check).
func hostUsrLocalEntry(t *testing.T) string {
	for _, d := range []string{"/usr/local/bin", "/usr/local/lib", "/usr/local"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			return filepath.Join(d, e.Name())
		}
	}
	t.Fatal("the host's /usr/local is empty: nothing to check the image root hides")
	return ""
}

// TestImageRootWritableLayer: root inside installs a package and writes
// under /usr; the change lands in that sandbox's writable layer only: a
// second sandbox of the same image and the shared layer trees never see it.
func TestImageRootWritableLayer(t *testing.T) {
	a, _ := imageLayers(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			_, root := startImageProbe(t, r, a, &runtime.User{UID: 0, GID: 0}, 0)
			_, other := startImageProbe(t, r, a, nil, 0)
			if got := root.sh(t, "id -u; grep CapEff /proc/self/status | tr -d '\\t'"); got.Out != "0\nCapEff:00000000800005fb\n" {
				t.Errorf("root's id and capabilities: %q", got.Out)
			}
			// A .deb built with dpkg-deb and installed with apt-get as
			// root (apt drops to _apt where it can): files owned by other
			// users, dpkg's database under /var/lib.
			deb := `set -e
mkdir -p /tmp/pkg/DEBIAN /tmp/pkg/usr/share/sandlot-test
printf 'Package: sandlot-test\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: test\n' > /tmp/pkg/DEBIAN/control
echo installed > /tmp/pkg/usr/share/sandlot-test/marker
dpkg-deb --root-owner-group -b /tmp/pkg /tmp/sandlot-test.deb >/dev/null
apt-get install -y -q /tmp/sandlot-test.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
dpkg -s sandlot-test | grep -c '^Status: install ok installed'
echo x > /usr/bin/from-root && chown 1000:1000 /usr/bin/from-root && stat -c %u /usr/bin/from-root
rm /usr/bin/python3 && test ! -e /usr/bin/python3 && echo removed`
			if got := root.sh(t, strings.ReplaceAll(deb, "\n", "; ")); got.Code != 0 || got.Out != "1\n1000\nremoved\n" {
				t.Fatalf("install as root: %q (exit %d)", got.Out, got.Code)
			}
			for _, cmd := range []string{"cat /usr/share/sandlot-test/marker", "dpkg -s sandlot-test", "cat /usr/bin/from-root"} {
				if got := other.sh(t, cmd); got.Code == 0 {
					t.Errorf("another sandbox of the image sees %q: %s", cmd, got.Out)
				}
			}
			if got := other.sh(t, "test -x /usr/bin/python3 && echo ok"); got.Out != "ok\n" {
				t.Errorf("a file removed in one sandbox is gone in another: %q", got.Out)
			}
			for _, l := range a {
				for _, p := range []string{"usr/share/sandlot-test", "usr/bin/from-root"} {
					if _, err := os.Lstat(filepath.Join(l, p)); err == nil {
						t.Errorf("%s written into the shared layer %s", p, l)
					}
				}
			}
		})
	}
}

// TestImageRootDiskLimit: the writable layer holds Limits.DiskBytes and no
// more (ENOSPC), wherever the sandbox writes; the root and its mounts are
// gone after Delete.
func TestImageRootDiskLimit(t *testing.T) {
	a, _ := imageLayers(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			id, p := startImageProbe(t, r, a, nil, 16<<20)
			got := p.sh(t, "dd if=/dev/zero of=/home/user/big bs=1M count=32 2>&1")
			if got.Code == 0 || !strings.Contains(got.Out, "No space left on device") {
				t.Errorf("writing 32 MiB into a 16 MiB layer: exit %d: %s", got.Code, got.Out)
			}
			if got := p.sh(t, "dd if=/dev/zero of=/tmp/big bs=1M count=32 2>&1; rm -f /tmp/big"); !strings.Contains(got.Out, "No space left on device") {
				t.Errorf("writing 32 MiB into /tmp with a 16 MiB limit: %s", got.Out)
			}
			if got := p.sh(t, "rm /home/user/big && dd if=/dev/zero of=/home/user/big2 bs=1M count=8 >/dev/null 2>&1 && echo ok"); got.Out != "ok\n" {
				t.Errorf("space freed by rm is not usable: %q", got.Out)
			}
			n, err := r.DiskUsage(context.Background(), id, HomeDir, "/tmp")
			if err != nil || n < 8<<20 || n > 16<<20 {
				t.Errorf("disk usage = %d, %v; want 8-16 MiB", n, err)
			}
			if err := r.Delete(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(r.rootDir(id)); !os.IsNotExist(err) {
				t.Errorf("root dir left after delete: %v", err)
			}
			if m := mountsUnder(t, r.rootDir(id)); len(m) != 0 {
				t.Errorf("mounts left under %s: %v", r.rootDir(id), m)
			}
		})
	}
}

// mountsUnder lists the host's mount points at or below dir. It reads its
// own thread's table: /proc/self is the main thread's, which may be crun's
// launcher thread, in a mount namespace of its own (mountns.go).
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}

// TestImageRootPrivateStateDir: a state dir inside a private (0700) data
// dir works for image roots too: the runtimes resolve the root path as
// the sandbox's root, a stranger to that dir.
func TestImageRootPrivateStateDir(t *testing.T) {
	a, _ := imageLayers(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			testenv.RequireBinary(t, kind)
			parent := t.TempDir() // 0700
			dir := filepath.Join(parent, "run")
			r, err := New(context.Background(), Config{Runtime: kind, StateDir: dir, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := Purge(dir); err != nil {
					t.Errorf("purge: %v", err)
				}
			})
			_, p := startImageProbe(t, r, a, nil, 0)
			if got := p.sh(t, "cat /image-a"); got.Out != "image-a\n" {
				t.Errorf("image root under a private state dir: %+v", got)
			}
		})
	}
}

// BenchmarkImageRoot measures what an image root adds to a create: the
// writable tmpfs, an id-mapped clone per layer, the overlay and the home
// check, then the unmount (timed too). The id range's user namespace is
// cached after the first iteration; BenchmarkUserns is its cost.
func BenchmarkImageRoot(b *testing.B) {
	_, img := debiantest.Default(b)
	r := newRuntime(b, KindRunc)
	ids := IDRange{Base: DefaultIDBase, Size: IDRangeSize}
	root := &runtime.Root{Layers: img.LowerDirs()}
	for i := 0; i < b.N; i++ {
		id := runtime.NewID()
		if _, err := r.mountImageRoot(id, root, ids, 64<<20, nil); err != nil {
			b.Fatal(err)
		}
		if err := r.unmountImageRoot(id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUserns is the cost of a user namespace for an id range (once
// per range and process).
func BenchmarkUserns(b *testing.B) {
	testenv.RequireRoot(b)
	for i := 0; i < b.N; i++ {
		fd, err := newUserns(IDRange{Base: DefaultIDBase, Size: IDRangeSize})
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}
