// Package debiantest gives tests the default Debian base image. Building
// it takes minutes, so it is built at most once per machine and cache key:
// every test package (each its own process) opens one image store in a
// fixed directory and takes an exclusive flock there while it looks the
// image up, so concurrent packages wait for one build and later runs (and
// later `make test`s on the same machine) find it cached.
//
// The directory is $SANDLOT_TEST_IMAGES, default /var/cache/sandlot-test.
// Tests never run GC on this store: it is shared by every test process.
package debiantest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/nettest"
)

// DirEnv overrides the cache directory.
const DirEnv = "SANDLOT_TEST_IMAGES"

// DefaultDir is where the shared test store lives.
const DefaultDir = "/var/cache/sandlot-test"

// Name is the name the default image gets in the shared store.
const Name = "default"

// shared is one image of the shared store, looked up or built once per
// process.
type shared struct {
	once  sync.Once
	store *image.Store
	img   image.Image
	built time.Duration // 0: found cached
	err   error
}

var (
	base shared
	// others are the non-default images (desktop, code-interpreter) by name.
	othersMu sync.Mutex
	others   = map[string]*shared{}
)

// Dir returns the shared cache directory.
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	return DefaultDir
}

// StoreDir is the shared image store's directory, for a daemon started by
// a test (sandlot serve --images-dir) after Default.
func StoreDir() string { return filepath.Join(Dir(), "images") }

// Default returns the shared store and the default Debian base image in it
// (debian.Config{}), building the image first when no process has yet. It
// needs root and mmdebstrap; in CI a missing one fails t. The build logs
// its progress to stderr, so a long wait in a test run says why.
func Default(t testing.TB) (*image.Store, image.Image) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "mmdebstrap")
	return base.get(t, debian.Config{}, Name)
}

// Image returns the shared store and the image cfg makes, tagged name,
// building it first when no process has yet (as Default does for the
// base). The desktop and code-interpreter templates' tests use it.
func Image(t testing.TB, cfg debian.Config, name string) (*image.Store, image.Image) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "mmdebstrap")
	if name == Name {
		return base.get(t, cfg, name)
	}
	othersMu.Lock()
	sh := others[name]
	if sh == nil {
		sh = &shared{}
		others[name] = sh
	}
	othersMu.Unlock()
	return sh.get(t, cfg, name)
}

func (sh *shared) get(t testing.TB, cfg debian.Config, name string) (*image.Store, image.Image) {
	t.Helper()
	sh.once.Do(func() {
		sh.store, sh.img, sh.built, sh.err = ensure(context.Background(), cfg, name)
	})
	if sh.err != nil {
		t.Fatalf("image %s for the tests: %v", name, sh.err)
	}
	if sh.built > 0 {
		t.Logf("built the image %s in %s: %s", name, sh.built.Round(time.Second), sh.img.Digest)
	}
	return sh.store, sh.img
}

// Prepare builds the image cfg makes into the shared store, tagged name,
// unless it is there already (the same lock and key as Image), and says
// how long the build took (0: found cached). make test's dependency step
// calls it (internal/cmd/testimages) so the images are built while the
// test cluster's binaries compile, before any test waits on them.
func Prepare(ctx context.Context, cfg debian.Config, name string) (time.Duration, error) {
	_, _, built, err := ensure(ctx, cfg, name)
	return built, err
}

func ensure(ctx context.Context, cfg debian.Config, name string) (*image.Store, image.Image, time.Duration, error) {
	dir := Dir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, image.Image{}, 0, err
	}
	// One lock per image: the base and the desktop image build at the
	// same time rather than one after the other (a test package waiting
	// for both would otherwise risk its timeout on a new machine).
	lockName := "build.lock"
	if name != Name {
		lockName = "build-" + name + ".lock"
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, image.Image{}, 0, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		fmt.Fprintf(os.Stderr, "debiantest: waiting for another test process to build the image %s in %s\n", name, dir)
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
			return nil, image.Image{}, 0, err
		}
	}
	s, err := image.Open(StoreDir(), image.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, image.Image{}, 0, err
	}
	if img, err := s.Get(ctx, debian.CachePrefix+cfg.Key()); err == nil {
		if err := s.Tag(ctx, name, img.Digest); err != nil {
			return nil, image.Image{}, 0, err
		}
		return s, img, 0, nil
	}
	// A test binary in a network namespace of its own (nettest.Main) has
	// no internet: mmdebstrap runs in the machine's namespace.
	if ns := nettest.MachineNetns(); ns != "" {
		wrapper, err := inNetns(dir, ns, cfg.Mmdebstrap)
		if err != nil {
			return nil, image.Image{}, 0, err
		}
		defer os.Remove(wrapper)
		cfg.Mmdebstrap = wrapper
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "debiantest: building the Debian image %s in %s (once per machine; minutes)\n", name, dir)
	// A line per step, and one every 10 s within a step (the progress
	// comes with every package).
	lastStep, lastAt := 0, time.Time{}
	img, err := debian.Ensure(ctx, s, cfg, name, func(p debian.Progress) {
		if p.Step == lastStep && time.Since(lastAt) < 10*time.Second {
			return
		}
		lastStep, lastAt = p.Step, time.Now()
		pkgs := ""
		if p.Total > 0 {
			pkgs = fmt.Sprintf(", %d/%d packages set up", p.Done, p.Total)
		}
		fmt.Fprintf(os.Stderr, "debiantest: %s %d/%d %s%s (%s)\n", name, p.Step, p.Steps, p.Phase, pkgs, time.Since(start).Round(time.Second))
	})
	return s, img, time.Since(start), err
}

// inNetns writes (in dir) a script that runs mmdebstrap (bin; "": the
// one on PATH) in the network namespace ns, and returns its path.
func inNetns(dir, ns, bin string) (string, error) {
	if bin == "" {
		bin = "mmdebstrap"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", err
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", err
	}
	if !plainPath.MatchString(ns) || !plainPath.MatchString(path) {
		return "", fmt.Errorf("debiantest: %q or %q is not a plain path", ns, path)
	}
	f, err := os.CreateTemp(dir, "mmdebstrap-netns-")
	if err != nil {
		return "", err
	}
	_, err = fmt.Fprintf(f, "#!/bin/sh\nexec nsenter --net=%s -- %s \"$@\"\n", ns, path)
	if err == nil {
		err = f.Chmod(0o700)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// plainPath is a path the wrapper's sh line takes as it is.
var plainPath = regexp.MustCompile(`^/[A-Za-z0-9/._+-]*$`)
