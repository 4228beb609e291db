package debian_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
)

func TestKey(t *testing.T) {
	base := debian.Config{}.Key()
	tests := []struct {
		name string
		cfg  debian.Config
		same bool
	}{
		{"defaults spelled out", debian.Config{Suite: debian.DefaultSuite, Mirror: debian.DefaultMirror, Packages: debian.DefaultPackages, Epoch: time.Unix(debian.DefaultEpoch, 0)}, true},
		{"package order and duplicates", debian.Config{Packages: append([]string{"python3", "bash"}, debian.DefaultPackages...)}, true},
		{"another package", debian.Config{Packages: append([]string{"jq"}, debian.DefaultPackages...)}, false},
		{"another suite", debian.Config{Suite: "trixie"}, false},
		{"another mirror", debian.Config{Mirror: "http://mirror.example/debian"}, false},
		{"another epoch", debian.Config{Epoch: time.Unix(1, 0)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.Key() == base; got != tt.same {
				t.Errorf("same key = %v, want %v", got, tt.same)
			}
		})
	}
}

func TestBuildWithoutMmdebstrap(t *testing.T) {
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = debian.Build(context.Background(), s, debian.Config{Mmdebstrap: "/nonexistent/mmdebstrap"}, nil)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("err = %v, want failed precondition", err)
	}
}

// realBuild returns the default image from the store every test process
// shares (debiantest: built at most once per machine and cache key). With
// SANDLOT_TEST_DEBIAN_FRESH=1 it builds into a fresh store instead, to
// measure a build from nothing; the progress phases are then checked.
func realBuild(t *testing.T) (*image.Store, image.Image, []string) {
	t.Helper()
	if os.Getenv("SANDLOT_TEST_DEBIAN_FRESH") != "1" {
		s, img := debiantest.Default(t)
		return s, img, nil
	}
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "mmdebstrap")
	s, err := image.Open(t.TempDir(), image.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var phases []string
	img, err := debian.Ensure(context.Background(), s, debian.Config{}, "default", func(p debian.Progress) {
		phases = append(phases, fmt.Sprintf("%d/%d %s at %s", p.Step, p.Steps, p.Phase, time.Since(start).Round(time.Second)))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %s; phases %q", time.Since(start).Round(time.Second), phases)
	return s, img, phases
}

// inImage runs script with /bin/sh inside img (read-only, /tmp a tmpfs)
// in a throwaway mount and pid namespace, and returns its output.
func inImage(t *testing.T, img image.Image, script string) string {
	t.Helper()
	return inImageMount(t, img, false, script)
}

// inImageMount is inImage with, when writable, an overlay whose writes
// go to a throwaway upper directory.
func inImageMount(t *testing.T, img image.Image, writable bool, script string) string {
	t.Helper()
	m := t.TempDir()
	lower := strings.Join(append(img.LowerDirs(), t.TempDir()), ":")
	flags, opts := uintptr(unix.MS_RDONLY), "lowerdir="+lower
	if writable {
		rw := t.TempDir()
		for _, d := range []string{"upper", "work"} {
			if err := os.Mkdir(filepath.Join(rw, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		flags, opts = 0, opts+",upperdir="+filepath.Join(rw, "upper")+",workdir="+filepath.Join(rw, "work")
	}
	if err := unix.Mount("overlay", m, "overlay", flags, opts); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(m, unix.MNT_DETACH)
	chroot := testenv.RequireBinary(t, "chroot")
	wrap := `set -e
mount -t proc proc "$1/proc"
mount -t tmpfs tmpfs "$1/tmp"
mount -t tmpfs tmpfs "$1/dev"
for d in null zero urandom; do : > "$1/dev/$d"; mount --bind "/dev/$d" "$1/dev/$d"; done
exec "$2" "$1" /bin/sh -c "$3"`
	cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--propagation", "private", "/bin/sh", "-c", wrap, "sh", m, chroot, script)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/tmp"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in image: %v\n%s", err, out)
	}
	return string(out)
}

// TestDebianBase builds the default image from the Debian mirror for real
// (minutes; CI runs it) and checks that it holds what sandboxes need.
func TestDebianBase(t *testing.T) {
	s, img, phases := realBuild(t)
	var size int64
	for _, l := range img.Layers {
		size += l.Size
	}
	t.Logf("%s: %d layer(s), %.1f MiB stored", img.Digest, len(img.Layers), float64(size)/(1<<20))
	if len(img.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(img.Layers))
	}
	t.Logf("unpacked: %.1f MiB in %d files", float64(du(t, img.Layers[0].Dir))/(1<<20), countFiles(t, img.Layers[0].Dir))
	if len(phases) > 0 {
		if got := phases[len(phases)-1]; !strings.HasPrefix(got, "10/10 done") {
			t.Errorf("last progress = %q", got)
		}
	}
	if d, err := s.Resolve(context.Background(), "default"); err != nil || d != img.Digest {
		t.Errorf("default = %s, %v", d, err)
	}
	out := inImage(t, img, `
python3 -c "
import ast, asyncio, json, numpy, pandas, matplotlib
matplotlib.use('agg')
import matplotlib.pyplot as plt
plt.plot([1, 2]); plt.savefig('/tmp/a.png')
print('python ok', pandas.DataFrame({'a': [1, 2]}).a.sum())
"
python3 -c "
import sys
print('lean start', [m for m in ('importlib.util', '_distutils_hack') if m in sys.modules])
import mpl_toolkits.mplot3d, setuptools, distutils
print('setuptools distutils', 'setuptools' in distutils.__file__)
"
node --expose-internals -e "require('internal/repl/await'); require('internal/deps/acorn/acorn/dist/acorn'); console.log('node ok')"
bash -c 'echo bash ok'
git --version >/dev/null && echo git ok
curl --version >/dev/null && echo curl ok
test -s /etc/ssl/certs/ca-certificates.crt && echo certs ok
id user
stat -c '%u:%g %a' /home/user
stat -c 'sudoers %u:%g %a' /etc/sudoers.d/user
grep -qx 'user ALL=(ALL:ALL) NOPASSWD: ALL' /etc/sudoers.d/user && test -x /usr/bin/sudo && echo sudo ok
grep -qx 'break-system-packages = true' /etc/pip.conf && pip --version >/dev/null && python --version >/dev/null && echo pip ok
test ! -e /usr/bin/g++ && ! python3 -c 'import scipy' 2>/dev/null && python3 -c 'import munkres' && echo no scipy
for f in /usr/lib/python3/dist-packages/numpy/__pycache__/__init__.cpython-311.pyc /usr/lib/python3/dist-packages/sympy/__pycache__/__init__.cpython-311.pyc /usr/share/python3/debpython/__pycache__/version.cpython-311.pyc; do
  test -s "$f" || echo "not compiled: $f"
done
head -c 1 /usr/bin/py3compile | grep -q '#' && grep -q 'import' /usr/bin/py3compile && ! dpkg-divert --list | grep -q py3compile && test ! -e /var/lib/sandlot-py3compile && echo py3compile restored
test -s /usr/share/doc/bash/copyright && test ! -e /usr/share/doc/bash/README && test -z "$(ls /usr/share/man)" && test -z "$(ls /usr/share/locale | grep -vx locale.alias)" && echo trimmed
test -z "$(find /etc/alternatives -xtype l)" && echo no dangling alternatives
`)
	for _, want := range []string{"python ok 3\n", "lean start []\n", "setuptools distutils True\n", "node ok\n", "bash ok\n", "git ok\n", "curl ok\n", "certs ok\n",
		"uid=1000(user) gid=1000(user) groups=1000(user)\n", "1000:1000 750\n", "sudoers 0:0 440\n", "sudo ok\n", "pip ok\n", "no scipy\n",
		"py3compile restored\n", "trimmed\n", "no dangling alternatives\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not compiled") {
		t.Errorf("modules left without their byte code (the deferred compile):\n%s", out)
	}
	c := img.Config.Config
	if c.Labels["org.sandlot.debian.key"] != (debian.Config{}).Key() || !img.Config.Created.Time.Equal(time.Unix(debian.DefaultEpoch, 0)) {
		t.Errorf("config labels %v created %v", c.Labels, img.Config.Created)
	}
}

// TestEnsureUsesCache: a second debian.Ensure with the same key takes the stored
// image and never runs mmdebstrap (here a binary that would fail).
func TestEnsureUsesCache(t *testing.T) {
	s, img, _ := realBuild(t)
	got, err := debian.Ensure(context.Background(), s, debian.Config{Mmdebstrap: "/bin/false"}, "python-template", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != img.Digest {
		t.Errorf("digest %s, want the cached %s", got.Digest, img.Digest)
	}
	if d, err := s.Resolve(context.Background(), "python-template"); err != nil || d != img.Digest {
		t.Errorf("python-template = %s, %v", d, err)
	}
	// Another key is another image: with no mmdebstrap it cannot be built.
	_, err = debian.Ensure(context.Background(), s, debian.Config{Packages: []string{"bash"}, Mmdebstrap: "/nonexistent"}, "", nil)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("uncached key: %v", err)
	}
}

func du(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(dir, func(string, fs.DirEntry, error) error { n++; return nil })
	return n
}

// TestBuildErrorKeepsTheTail: a failed build's error ends with the last of
// mmdebstrap's stderr, where the failing maintainer script's message is
// (apt's download list filled the first 8 KiB, and it was all a failure
// showed).
func TestBuildErrorKeepsTheTail(t *testing.T) {
	testenv.RequireRoot(t) // the build runs mmdebstrap in a mount namespace
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "mmdebstrap")
	script := "#!/bin/sh\nfor i in $(seq 1 2000); do echo \"Get:$i http://deb.debian.org/debian bookworm/main pkg$i\" >&2; done\n" +
		"echo 'update-alternatives: error: error creating symbolic link' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = debian.Build(context.Background(), s, debian.Config{Mmdebstrap: fake}, nil)
	if err == nil || !strings.Contains(err.Error(), "update-alternatives: error") || !strings.Contains(err.Error(), "pkg2000") {
		t.Fatalf("err = %.300v…, want the last lines", err)
	}
	if strings.Contains(err.Error(), "pkg1 ") || len(err.Error()) > 10<<10 {
		t.Errorf("the error holds the first lines or is over its bound (%d bytes)", len(err.Error()))
	}
}

// TestEssentialHooks: an essential hook is part of the cache key.
func TestEssentialHooks(t *testing.T) {
	a := debian.Config{}
	b := debian.Config{Essential: []string{`mkdir -p "$1/usr/share/man/man1"`}}
	if a.Key() == b.Key() {
		t.Error("an essential hook does not change the key")
	}
}

// TestBuilderPinsItsImage: a built-in's builder serves the image the
// store had for its template when the builder was made (here an
// operator's, under the template's name), and keeps serving it when the
// name is moved later: the template resolves by that digest
// (templates.Config.Builtins), not by a name anything writing the store
// can move. A store without the image has none until a build.
func TestBuilderPinsItsImage(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := debian.Config{Mmdebstrap: "/nonexistent/mmdebstrap"}
	if _, ok := debian.NewBuilder(ctx, s, "tpl", cfg, nil).Image(); ok {
		t.Error("a builder over a store without the image has one")
	}
	put := func(marker string) v1.Hash {
		img, err := s.Put(ctx, imagetest.Image(t, imagetest.Layer(t, imagetest.File{Name: "marker", Body: marker})), image.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return img.Digest
	}
	real, evil := put("real"), put("evil")
	if err := s.Tag(ctx, "tpl", real); err != nil {
		t.Fatal(err)
	}
	b := debian.NewBuilder(ctx, s, "tpl", cfg, nil)
	if err := s.Tag(ctx, "tpl", evil); err != nil {
		t.Fatal(err)
	}
	if d, ok := b.Image(); !ok || d != real {
		t.Errorf("Image = %s %v, want the image at the builder's start %s", d, ok, real)
	}
	if err := b.Missing("tpl"); err != nil {
		t.Errorf("Missing with an image: %v", err)
	}
}

// TestDefaultCore builds the default template's first stage (the core that
// serves while the full image builds) and checks that it runs what the
// agent's kernels need: python3 (standard library, `python`), node with
// its REPL internals, bash, the CA bundle and the sandbox user.
func TestDefaultCore(t *testing.T) {
	core := debian.DefaultStages()[0]
	if core.Name != "core" {
		t.Fatalf("the first stage is %q", core.Name)
	}
	_, img := debiantest.Image(t, debian.DefaultStages()[0].Config, "default-core")
	out := inImage(t, img, `
python3 -c "import json, asyncio, ssl, sqlite3; print('python ok')"
python -c "print('python is python3')"
node --expose-internals -e "require('internal/repl/await'); require('internal/deps/acorn/acorn/dist/acorn'); console.log('node ok')"
bash -c 'echo bash ok'
test -s /etc/ssl/certs/ca-certificates.crt && echo certs ok
id user
test ! -e /usr/bin/apt-get && echo no apt
test -s /usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc && echo stdlib compiled
`)
	for _, want := range []string{"python ok\n", "python is python3\n", "node ok\n", "bash ok\n", "certs ok\n",
		"uid=1000(user) gid=1000(user) groups=1000(user)\n", "no apt\n", "stdlib compiled\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var size int64
	for _, l := range img.Layers {
		size += l.Size
	}
	t.Logf("core %s: %.1f MiB stored, unpacked %.1f MiB", img.Digest, float64(size)/(1<<20), float64(du(t, img.Layers[0].Dir))/(1<<20))
}
