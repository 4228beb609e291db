package debiantest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Fake is a stand-in for mmdebstrap, for tests of what happens while a
// Debian image builds (progress, readiness, the staged default): it
// prints what mmdebstrap --verbose prints (its steps, apt's package
// total, dpkg's "Unpacking" and "Setting up" lines), then waits in the
// step that installs packages until the test releases its stage, and
// writes a tarball of one file, /stage, holding the stage's name; then it
// says it removes its temporary tree (and can stay a while: HoldExit). A
// build with --variant=essential is the stage "core", any other "full".
type Fake struct {
	// Path is the fake's executable (debian.Config.Mmdebstrap), in a
	// directory of its own named mmdebstrap, so that directory can lead
	// $PATH for a daemon that looks mmdebstrap up there.
	Path string
	dir  string
}

// FakeTotals are the package totals the fake reports: the essential
// set's, then the rest's; in the rest it sets up FakeDone before waiting.
const (
	FakeEssential = 3
	FakeTotal     = 4
	FakeDone      = 1
)

// NewFake writes a fake mmdebstrap for t.
func NewFake(t testing.TB) *Fake {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
dir=%q
case " $* " in *" --variant=essential "*) stage=core ;; *) stage=full ;; esac
touch "$dir/running.$$"
trap 'rm -f "$dir/running.$$"' EXIT
echo "$stage" >> "$dir/calls"
say() { echo "$1" >&2; }
say "I: running apt-get update..."
say "I: downloading packages with apt..."
say "0 upgraded, %d newly installed, 0 to remove and 0 not upgraded."
say "I: extracting archives..."
say "I: installing essential packages..."
say "Unpacking base-files (12.4+deb12u15) ..."
say "Setting up base-files (12.4+deb12u15) ..."
say "I: installing remaining packages inside the chroot..."
say "0 upgraded, %d newly installed, 0 to remove and 0 not upgraded."
say "Unpacking python3-numpy:amd64 (1:1.24.2-1) ..."
say "Unpacking python3-sympy (1.11.1-1) ..."
say "Setting up python3-numpy:amd64 (1:1.24.2-1) ..."
touch "$dir/$stage.reached"
while [ ! -e "$dir/$stage.go" ]; do sleep 0.05; done
if [ -e "$dir/$stage.fail" ]; then say "E: the mirror went away"; exit 1; fi
say "I: cleaning package lists and apt cache..."
say "I: creating tarball..."
mkdir -p "$dir/tree-$stage"
echo "$stage" > "$dir/tree-$stage/stage"
tar -C "$dir/tree-$stage" -c .
say "I: done"
say "I: removing tempdir /tmp/mmdebstrap.fake..."
if [ -e "$dir/hold-exit" ]; then
  touch "$dir/$stage.holding"
  while [ ! -e "$dir/$stage.exit" ]; do sleep 0.05; done
fi
say "I: success in 1.0 seconds"
`, dir, FakeEssential, FakeTotal)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(bin, "mmdebstrap")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A build still waiting ends with the test, and the test waits for
		// it (up to a minute), so nothing writes here while it is removed.
		for _, st := range []string{"core", "full"} {
			_ = os.WriteFile(filepath.Join(dir, st+".fail"), nil, 0o644)
			_ = os.WriteFile(filepath.Join(dir, st+".go"), nil, 0o644)
			_ = os.WriteFile(filepath.Join(dir, st+".exit"), nil, 0o644)
		}
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if running, _ := filepath.Glob(filepath.Join(dir, "running.*")); len(running) == 0 {
				return
			}
		}
		t.Errorf("the fake mmdebstrap still runs a minute after the test")
	})
	return &Fake{Path: path, dir: dir}
}

// Dir is the directory holding the fake, to lead $PATH.
func (f *Fake) Dir() string { return filepath.Dir(f.Path) }

// Reached waits (up to a minute) until the build of stage waits for its
// release, having reported FakeDone of FakeTotal packages set up.
func (f *Fake) Reached(t testing.TB, stage string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(f.dir, stage+".reached")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake mmdebstrap never reached the %s stage's wait (calls: %q)", stage, f.Calls())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Release lets stage's build finish; with fail it fails instead.
func (f *Fake) Release(t testing.TB, stage string, fail bool) {
	t.Helper()
	if fail {
		if err := os.WriteFile(filepath.Join(f.dir, stage+".fail"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.dir, stage+".go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// HoldExit makes the fake, once it has written its tarball and says it
// removes its temporary tree, stay until ReleaseExit, as mmdebstrap does
// while it removes the tree (tens of seconds under load).
func (f *Fake) HoldExit(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, "hold-exit"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Holding reports whether the build of stage has handed its tarball over
// and stays (HoldExit).
func (f *Fake) Holding(stage string) bool {
	_, err := os.Stat(filepath.Join(f.dir, stage+".holding"))
	return err == nil
}

// ReleaseExit lets stage's build end after HoldExit.
func (f *Fake) ReleaseExit(t testing.TB, stage string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, stage+".exit"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Calls are the stages the fake was run for, in order.
func (f *Fake) Calls() []string {
	b, _ := os.ReadFile(filepath.Join(f.dir, "calls"))
	return strings.Fields(string(b))
}
