// Package debian builds sandlot's base image from Debian's package mirror
// alone, no registry: mmdebstrap makes a root file system of the given
// packages, which becomes a single-layer image in the image store, cached
// under a key of suite, mirror and package list. It is the `default`
// template's image: python3 with numpy, pandas, matplotlib and IPython, node, bash,
// coreutils, git, curl and CA certificates, and a user "user" (1000:1000,
// home /home/user) as the sandboxes expect. The sandbox agent is not in
// the image: the runtime bind-mounts it.
//
// mmdebstrap runs on the host as root: it is the trusted tool that turns
// signed Debian packages into a tree (maintainer scripts run in a chroot of
// that tree). No recipe command runs here.
package debian

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/source"
	"github.com/sandlot/sandlot/internal/logkey"
)

// DefaultPackages is what the default image holds beyond Debian's
// essential set and apt: the agent's kernels need python3 (standard
// library only) at /usr/bin/python3, node at /usr/bin/node (its REPL
// internals, present in Debian's nodejs) and bash at /bin/bash;
// python3-ipython is the python kernel's IPython mode (about 16 MB with
// its dependencies, Recommends left out).
//
// python3-munkres is there for what it keeps out: python3-fonttools (a
// matplotlib dependency) Depends on "python3-scipy | python3-munkres",
// and apt takes the first alternative unless another is already being
// installed. scipy pulls python3-pythran, and with it g++ and the Boost
// headers: about half the image and most of its build time.
var DefaultPackages = []string{
	"bash", "ca-certificates", "coreutils", "curl", "git", "nodejs",
	"python3", "python3-ipython", "python3-matplotlib", "python3-munkres", "python3-numpy", "python3-pandas",
	"python3-pip", "python-is-python3", "sudo",
}

// CorePackages are the default template's first stage, the core: what
// the agent's kernels need (python3, node, bash), coreutils, CA
// certificates and `python` for python3, on Debian's essential set
// without apt. It is built in about a third of the full image's time
// (python's and node's libraries against the full set's 240 packages),
// serves the first sandboxes, and is replaced by the full image
// (DefaultPackages) once that is built (DefaultStages).
var CorePackages = []string{"bash", "ca-certificates", "coreutils", "nodejs", "python-is-python3", "python3"}

// DefaultStages are the default template's stages: the core, then the
// full image.
func DefaultStages() []Stage {
	return []Stage{
		{Name: "core", Config: Config{Packages: CorePackages, Variant: "essential"}},
		{Name: "full", Config: Config{}},
	}
}

// Defaults.
const (
	DefaultSuite  = "bookworm"
	DefaultMirror = "http://deb.debian.org/debian"
	// DefaultEpoch is SOURCE_DATE_EPOCH when none is given: 2023-11-14, a
	// fixed time so two builds from the same package versions give the same
	// tarball and digest.
	DefaultEpoch = 1700000000
	// recipeVersion changes when the way the image is made changes, so an
	// old cached image is not taken for a new one.
	recipeVersion = "5"
	// CachePrefix names cached base images: CachePrefix + key.
	CachePrefix = "sandlot/debian-base:"
)

// Config says what to build. Zero values are documented per field.
type Config struct {
	Suite string // "": DefaultSuite
	// Variant is mmdebstrap's: "" is apt (the essential set and apt);
	// essential leaves apt out (the default template's core stage).
	Variant  string
	Mirror   string    // "": DefaultMirror
	Packages []string  // nil: DefaultPackages
	Epoch    time.Time // zero: DefaultEpoch
	// Customize are shell scripts run after the base's own (the sandbox
	// user): mmdebstrap's --customize-hook, with the new tree's path as
	// $1, as root on the host (so only the daemon's own recipes, never a
	// tenant's). Part of the cache key.
	Customize []string
	// Essential are shell scripts run once the essential packages are in,
	// before the others are installed: mmdebstrap's --essential-hook, with
	// the tree's path as $1, as root on the host (the daemon's own recipes
	// only). Part of the cache key.
	Essential []string
	// Mmdebstrap is the mmdebstrap binary; "": mmdebstrap on PATH.
	Mmdebstrap string
	Logger     *slog.Logger // nil discards
}

func (c Config) withDefaults() Config {
	if c.Suite == "" {
		c.Suite = DefaultSuite
	}
	if c.Variant == "" {
		c.Variant = "apt"
	}
	if c.Mirror == "" {
		c.Mirror = DefaultMirror
	}
	if c.Packages == nil {
		c.Packages = DefaultPackages
	}
	c.Packages = slices.Clone(c.Packages)
	slices.Sort(c.Packages)
	c.Packages = slices.Compact(c.Packages)
	if c.Epoch.IsZero() {
		c.Epoch = time.Unix(DefaultEpoch, 0)
	}
	if c.Mmdebstrap == "" {
		c.Mmdebstrap = "mmdebstrap"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Key is the cache key of what Config builds: suite, mirror, sorted
// packages, epoch and the recipe version.
func (c Config) Key() string {
	c = c.withDefaults()
	h := sha256.New()
	fmt.Fprintf(h, "v%s\n%s\n%s\n%d\n%s\n", recipeVersion, c.Suite, c.Mirror, c.Epoch.Unix(), strings.Join(c.Packages, ","))
	if c.Variant != "apt" {
		fmt.Fprintf(h, "variant %s\n", c.Variant)
	}
	for _, hook := range c.Customize {
		fmt.Fprintf(h, "hook %d\n%s\n", len(hook), hook)
	}
	for _, hook := range c.Essential {
		fmt.Fprintf(h, "essential hook %d\n%s\n", len(hook), hook)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Ensure returns the base image for cfg, building it only when the store
// holds none under its key. When name is set (e.g. "default") it is
// tagged to the image too.
func Ensure(ctx context.Context, s *image.Store, cfg Config, name string, progress func(Progress)) (image.Image, error) {
	img, err := s.Get(ctx, CachePrefix+cfg.Key())
	if errors.Is(err, errdefs.ErrNotFound) {
		img, err = Build(ctx, s, cfg, progress)
	}
	if err != nil {
		return image.Image{}, err
	}
	if name != "" {
		if err := s.Tag(ctx, name, img.Digest); err != nil {
			return image.Image{}, err
		}
	}
	return img, nil
}

// Build builds the image with mmdebstrap and stores it as
// CachePrefix+cfg.Key(). It takes minutes: mmdebstrap downloads and
// installs every package.
func Build(ctx context.Context, s *image.Store, cfg Config, progress func(Progress)) (image.Image, error) {
	cfg = cfg.withDefaults()
	if progress == nil {
		progress = func(Progress) {}
	}
	tr := newTracker(time.Now)
	var trMu sync.Mutex // the stderr reader and this goroutine both report
	report := func(i int) {
		trMu.Lock()
		if i >= 0 {
			tr.enter(i)
		}
		p := tr.progress()
		trMu.Unlock()
		progress(p)
	}
	bin, err := exec.LookPath(cfg.Mmdebstrap)
	if err != nil {
		return image.Image{}, fmt.Errorf("debian: mmdebstrap is needed to build the base image (apt-get install mmdebstrap): %w", errdefs.ErrFailedPrecondition)
	}
	lease, err := s.Lease(ctx)
	if err != nil {
		return image.Image{}, err
	}
	defer lease.Release()

	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return image.Image{}, fmt.Errorf("debian: unshare (util-linux) is needed: %w", errdefs.ErrFailedPrecondition)
	}
	scratch, err := os.MkdirTemp(filepath.Join(s.Root(), "tmp"), "debian-")
	if err != nil {
		return image.Image{}, err
	}
	removeScratch := true // unless mmdebstrap still removes its tree there
	defer func() {
		if removeScratch {
			os.RemoveAll(scratch)
		}
	}()

	start := time.Now()
	// The last lines of mmdebstrap's stderr (not the first: apt's download
	// list filled them, and a failing maintainer script's error, which
	// comes last, was lost).
	var tail []string
	tailBytes := 0
	// The tarball is unpacked into the store as it streams (NewTarLayer):
	// compressing it and unpacking it afterwards took ~3 minutes here.
	layer, err := s.NewTarLayer(ctx, func(w io.Writer) error {
		// mmdebstrap mounts /proc, /sys and /dev into its chroot: in a
		// mount namespace of its own those mounts die with it, even when a
		// cancelled build kills it midway. Its process group is killed as a
		// whole (apt and dpkg included), and its temporary tree lives in the
		// store's tmp/, which GC empties.
		cmd := exec.CommandContext(ctx, unshare, append([]string{"--mount", "--propagation", "private", "--", bin}, args(cfg)...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8",
			"TMPDIR=" + scratch, "SOURCE_DATE_EPOCH=" + strconv.FormatInt(cfg.Epoch.Unix(), 10)}
		stdout, err := cmd.StdoutPipe() // the root file system as a tarball
		if err != nil {
			return err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		handed := make(chan struct{}) // the whole tarball is in stdout
		lines := make(chan struct{})  // stderr ended
		handedOver := (<-chan struct{})(handed)
		tarDone := false
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stderr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				cfg.Logger.Debug("mmdebstrap", "line", line)
				trMu.Lock()
				changed := tr.line(line)
				trMu.Unlock()
				if changed {
					report(-1)
				}
				// "I: done" comes once the tarball is made; mmdebstrap says it
				// removes its tree after a failure too, when no tarball came.
				if strings.HasPrefix(line, "I: done") {
					tarDone = true
				}
				if strings.HasPrefix(line, "I: removing tempdir") && tarDone && handed != nil {
					close(handed)
					handed = nil
				}
				if !strings.HasPrefix(line, "I: ") {
					tail = append(tail, line)
					for tailBytes += len(line) + 1; tailBytes > 8<<10 && len(tail) > 1; tail = tail[1:] {
						tailBytes -= len(tail[0]) + 1
					}
				}
			}
		}()
		drained, err := copyTar(w, stdout.(*os.File), handedOver)
		if err != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-lines
			_ = cmd.Wait()
			return err
		}
		if drained {
			// mmdebstrap removes its tree (tens of seconds under load) while
			// the store finishes; its exit can only say that removal failed.
			removeScratch = false
			go func() {
				<-lines
				if err := cmd.Wait(); err != nil && ctx.Err() == nil { // a shutdown kills it: what is left of its tree is in tmp/, which GC empties
					cfg.Logger.Warn("debian: mmdebstrap failed after handing over the image", slog.String(logkey.Err, err.Error()))
				}
				os.RemoveAll(scratch)
			}()
			return nil
		}
		<-lines
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("debian: mmdebstrap: %v\n%s: %w", err, strings.Join(tail, "\n"), errdefs.ErrUnavailable)
		}
		return nil
	})
	if err != nil {
		return image.Image{}, err
	}
	defer layer.Close()
	// Less than a tar's end-of-archive marker is no root file system (a
	// build that stopped without saying so).
	if size, err := layer.Size(); err != nil || size < 1024 {
		return image.Image{}, fmt.Errorf("debian: mmdebstrap wrote no root file system (%d bytes)\n%s: %w", size, strings.Join(tail, "\n"), errdefs.ErrUnavailable)
	}
	report(phaseStore)

	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return image.Image{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return image.Image{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = source.Platform.OS, source.Platform.Architecture
	cf.Created = v1.Time{Time: cfg.Epoch.UTC()}
	cf.Config = v1.Config{
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		Cmd:        []string{"/bin/bash"},
		WorkingDir: "/home/user",
		Labels: map[string]string{
			"org.sandlot.debian.key":      cfg.Key(),
			"org.sandlot.debian.suite":    cfg.Suite,
			"org.sandlot.debian.mirror":   cfg.Mirror,
			"org.sandlot.debian.packages": strings.Join(cfg.Packages, ","),
		},
	}
	cf.History = []v1.History{{Created: cf.Created, CreatedBy: "mmdebstrap " + cfg.Suite + " " + strings.Join(cfg.Packages, ",")}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return image.Image{}, err
	}
	// The cache name is set only when new: when another process finished
	// a build of the same recipe first, its image serves.
	stored, err := s.Put(ctx, img, image.PutOptions{Name: CachePrefix + cfg.Key()})
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		stored, err = s.Get(ctx, CachePrefix+cfg.Key())
	}
	if err != nil {
		return image.Image{}, err
	}
	size, _ := layer.Size()
	cfg.Logger.Info("debian base image built", "digest", stored.Digest.String(), "suite", cfg.Suite,
		"packages", len(cfg.Packages), "layer_bytes", size, "duration", time.Since(start).Round(time.Second))
	report(phaseDone)
	return stored, nil
}

// copyTar copies mmdebstrap's tarball from r to w until r ends or, once
// handed is closed, r has had nothing for a moment. mmdebstrap copies the
// whole tarball to its stdout before it says it removes its temporary
// tree, and it keeps stdout open until that is done: tens of seconds of
// a build under load, which the store's own finishing overlaps now.
// drained reports the second case.
func copyTar(w io.Writer, r *os.File, handed <-chan struct{}) (drained bool, err error) {
	done := make(chan struct{})
	defer close(done)
	go func() {
		// A read blocked on an empty pipe when the tarball is handed over
		// wakes up.
		select {
		case <-handed:
			_ = r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		case <-done:
		}
	}()
	buf := make([]byte, 256<<10)
	for {
		select {
		case <-handed:
			// Renewed before each read: data in the pipe returns at once,
			// an empty pipe times out.
			if err := r.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
				return false, err
			}
		default:
		}
		n, rerr := r.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return false, err
			}
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF):
			return false, nil
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			return true, nil
		default:
			return false, rerr
		}
	}
}

// customize adds the sandbox user (1000:1000, home /home/user, bash), as
// E2B's images and sandlot's sandboxes have it, and, when the image has
// sudo, lets the user use it without a password, as on E2B: root of a
// sandbox is root of its user namespace only (docs/security-walls-sandbox.md). Where
// the image has pip, pip may install into the sandbox's python (PEP 668's
// guard is for a host's system python; a sandbox's is its own), as
// `pip install` and the Template SDK's pipInstall do on E2B.
//
// Two .pth files that run code at every python start are removed, about
// a quarter of python's start in a sandbox (10 ms of 45 on the dev
// machine; every cold kernel, script and pip pays it): matplotlib's
// nspkg.pth imports importlib.util to declare mpl_toolkits a namespace
// package, which Debian's mpl_toolkits (a regular package, with its
// __init__.py) does not need, and setuptools' distutils-precedence.pth,
// whose hook setuptools installs again itself when it is imported.
const customize = `set -e
echo 'user:x:1000:1000:user:/home/user:/bin/bash' >> "$1/etc/passwd"
echo 'user:x:1000:' >> "$1/etc/group"
echo 'user:*:19000:0:99999:7:::' >> "$1/etc/shadow"
mkdir -p "$1/home/user"
chown 1000:1000 "$1/home/user"
chmod 0750 "$1/home/user"
if [ -d "$1/etc/sudoers.d" ]; then
  echo 'user ALL=(ALL:ALL) NOPASSWD: ALL' > "$1/etc/sudoers.d/user"
  chmod 0440 "$1/etc/sudoers.d/user"
fi
if [ -x "$1/usr/bin/pip3" ]; then
  printf '[global]\nbreak-system-packages = true\n' > "$1/etc/pip.conf"
fi
dist="$1/usr/lib/python3/dist-packages"
if [ -f "$dist/mpl_toolkits/__init__.py" ]; then
  rm -f "$dist"/matplotlib-*-nspkg.pth
fi
rm -f "$dist/distutils-precedence.pth"
`

// trim is the first essential hook. The essential set is extracted
// without dpkg's path filters: with them, mmdebstrap pipes every
// essential package through mmtarfilter, a python program, which took 26
// of the 92 s of a small build (load 9) where the unfiltered extraction
// took 10. What the filters would have kept out of the essential set
// (documentation but copyright files, manuals, translations but
// locale.alias) is removed here, and the filters are set for dpkg, which
// applies them itself to everything installed after, in the build and in
// a sandbox's apt-get install.
const trim = `set -e
cd "$1"
mkdir -p usr/share/doc usr/share/man usr/share/locale
find usr/share/doc -mindepth 1 ! -type d ! -name copyright ! \( -type l -path 'usr/share/doc/*' ! -path 'usr/share/doc/*/*' \) -delete
find usr/share/doc -mindepth 1 -depth -type d -empty -delete
find usr/share/man -mindepth 1 -delete
find usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
chroot "$1" find /etc/alternatives -xtype l -delete
cat > etc/dpkg/dpkg.cfg.d/90sandlot-nodoc <<'EOF'
path-exclude=/usr/share/man/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
EOF
`

// deferCompile is an essential hook: Debian's python packages
// byte-compile their modules in their maintainer scripts (py3compile -p
// PACKAGE), one package after another on one core; python3-sympy alone
// took 55 s of a build under load. py3compile is diverted to a stub that
// writes down what it was asked, and compileNow does it all at the end,
// on every core: the same files compiled the same way (the stub's lines
// are py3compile's own arguments). Measured on the full image, at load
// 14-25 on the 2 shared cores: the packages' step and the compiling 173
// s, against 238 s for the packages' step alone before, with the same
// 6,584 .pyc files.
const deferCompile = `set -e
chroot "$1" dpkg-divert --quiet --local --rename --divert /usr/bin/py3compile.sandlot --add /usr/bin/py3compile
cat > "$1/usr/bin/py3compile" <<'EOF'
#!/bin/sh
# sandlot's image build: compiled at its end, on every core (image/debian).
echo "$*" >> /var/lib/sandlot-py3compile
EOF
chmod 0755 "$1/usr/bin/py3compile"
`

// compileNow is the first customize hook: it puts py3compile back and
// runs what deferCompile wrote down, as many at once as the host has
// cores.
const compileNow = `set -e
rm -f "$1/usr/bin/py3compile"
chroot "$1" dpkg-divert --quiet --local --rename --remove /usr/bin/py3compile
if [ -s "$1/var/lib/sandlot-py3compile" ]; then
  chroot "$1" xargs -P "$(nproc)" -L 1 py3compile < "$1/var/lib/sandlot-py3compile"
fi
rm -f "$1/var/lib/sandlot-py3compile"
`

// loginProfile is a customize hook: a login shell's profile that starts
// no process. E2B's SDKs run every command as `bash -l -c CMD`, and
// Debian's /etc/profile forks and execs `id -u` to pick root's PATH or a
// user's (2 of a login bash's 4.6 ms in a sandbox); root's ~/.profile
// runs `mesg n`, which with no terminal fails and changes nothing. The
// new /etc/profile is Debian's with bash's $EUID in place of `id -u`
// (other shells, which have no EUID of their own, still run `id -u`; an
// EUID a caller exported is believed by bash and sh alike, the one
// difference left, a choice of PATH); root's
// ~/.profile runs mesg only when stdin or stdout is a terminal, the ones
// mesg looks at (stderr goes to /dev/null). Each is Debian's own file
// edited, and only when it holds the line: base-files' postinst writes
// them (no package ships them), and on an upgrade replaces them only
// when they are one of its past versions, so `apt-get upgrade` leaves
// these alone and asks nothing. A local dpkg diversion keeps Debian's
// text beside them (/etc/profile.distrib, /root/.profile.distrib) and
// would take a future package's copy there instead of over them.
const loginProfile = `set -e
if grep -qF '"$(id -u)"' "$1/etc/profile"; then
  chroot "$1" dpkg-divert --quiet --local --rename --add /etc/profile
  cp -p "$1/etc/profile.distrib" "$1/etc/profile"
  sed -i 's/"$(id -u)"/"${EUID:-$(id -u)}"/g' "$1/etc/profile"
fi
if grep -qx 'mesg n 2> /dev/null || true' "$1/root/.profile"; then
  chroot "$1" dpkg-divert --quiet --local --rename --add /root/.profile
  cp -p "$1/root/.profile.distrib" "$1/root/.profile"
  sed -i 's/^mesg n 2> \/dev\/null || true$/if [ -t 0 ] || [ -t 1 ]; then mesg n 2> \/dev\/null || true; fi/' "$1/root/.profile"
fi
`

// args is the mmdebstrap command line: the tarball goes to stdout.
// Recommends are not installed; documentation, manuals and translations
// are left out (trim; copyright files stay). --verbose passes apt's and
// dpkg's lines through, which the build counts packages by.
func args(c Config) []string {
	hooks := []string{"--essential-hook=" + trim, "--essential-hook=" + deferCompile,
		"--customize-hook=" + compileNow, "--customize-hook=" + customize, "--customize-hook=" + loginProfile}
	for _, h := range c.Customize {
		hooks = append(hooks, "--customize-hook="+h)
	}
	for _, h := range c.Essential {
		hooks = append(hooks, "--essential-hook="+h)
	}
	return append(append([]string{
		"--verbose", "--variant=" + c.Variant, "--mode=root", "--format=tar",
		"--aptopt=APT::Install-Recommends \"false\"",
		// No fsync per unpacked file: a build that dies is thrown away whole.
		"--dpkgopt=force-unsafe-io",
		"--include=" + strings.Join(c.Packages, ","),
	}, hooks...), c.Suite, "-", c.Mirror)
}
