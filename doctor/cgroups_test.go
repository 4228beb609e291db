package doctor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestStrayCgroups: on a fake v1 host, the empty sandbox cgroups no
// sandbox of the state dir owns are counted and removed, and nothing
// else is: a cgroup with a process or a child cgroup, one the state dir
// or another daemon's knows, one made within the minute, a name outside the sandbox pattern,
// a link named like a sandbox's, a parent that is a link (to a directory
// outside the hierarchy), and a cgroup.procs that is a link.
func TestStrayCgroups(t *testing.T) {
	h := newFakeHost(t)
	cfg := h.config(t)
	cfg.StateDir = t.TempDir()
	cfg.MoreStateDirs = []string{t.TempDir()}
	cg := filepath.Join(h.root, "sys/fs/cgroup")
	outside := t.TempDir()
	old := time.Now().Add(-time.Hour)
	mk := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var aged []string
	age := func(p string) { aged = append(aged, p) }
	for _, ctl := range []string{"memory", "pids"} {
		parent := mk(filepath.Join(cg, ctl, "sandlot"))
		age(mk(filepath.Join(parent, "sb-0123456789ab")))   // stray
		age(mk(filepath.Join(parent, "sb-stray-two")))      // stray
		mk(filepath.Join(parent, "sb-young"))               // made just now
		age(mk(filepath.Join(parent, "sb-known")))          // the state dir's
		age(mk(filepath.Join(parent, "sb-other")))          // another daemon's
		age(mk(filepath.Join(parent, "notasandbox")))       // outside the pattern
		age(mk(filepath.Join(parent, "sb-Upper")))          // outside the pattern
		age(mk(filepath.Join(parent, "sb-child", "inner"))) // a child cgroup
		age(filepath.Join(parent, "sb-child"))
		busy := mk(filepath.Join(parent, "sb-busy"))
		if err := os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte("4242\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		age(busy)
		empty := mk(filepath.Join(parent, "sb-emptyprocs")) // stray: an empty cgroup.procs is no process
		if err := os.WriteFile(filepath.Join(empty, "cgroup.procs"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		age(empty)
		linked := mk(filepath.Join(parent, "sb-procslink"))
		if err := os.Symlink("/dev/null", filepath.Join(linked, "cgroup.procs")); err != nil {
			t.Fatal(err)
		}
		age(linked)
		victim := mk(filepath.Join(outside, ctl+"-victim"))
		age(victim)
		if err := os.Symlink(victim, filepath.Join(parent, "sb-link")); err != nil {
			t.Fatal(err)
		}
	}
	// A hierarchy that is a link (v1's cpu -> cpu,cpuacct) and one whose
	// sandlot parent is a link out of the hierarchy.
	mk(filepath.Join(cg, "cpu,cpuacct"))
	if err := os.Symlink("cpu,cpuacct", filepath.Join(cg, "cpu")); err != nil {
		t.Fatal(err)
	}
	age(mk(filepath.Join(cg, "cpu,cpuacct", "sandlot", "sb-cpu000000001"))) // stray
	age(mk(filepath.Join(outside, "evil", "sb-evil00000001")))
	mk(filepath.Join(cg, "blkio"))
	if err := os.Symlink(filepath.Join(outside, "evil"), filepath.Join(cg, "blkio", "sandlot")); err != nil {
		t.Fatal(err)
	}
	mk(filepath.Join(cfg.StateDir, "bundles", "sb-known"))
	mk(filepath.Join(cfg.MoreStateDirs[0], "bundles", "sb-other"))
	// Children first: making an entry in a directory sets its mtime.
	slices.SortFunc(aged, func(a, b string) int { return len(b) - len(a) })
	for _, p := range aged {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}

	var want []string
	for _, p := range []string{"cpu,cpuacct/sandlot/sb-cpu000000001",
		"memory/sandlot/sb-0123456789ab", "memory/sandlot/sb-emptyprocs", "memory/sandlot/sb-stray-two",
		"pids/sandlot/sb-0123456789ab", "pids/sandlot/sb-emptyprocs", "pids/sandlot/sb-stray-two"} {
		want = append(want, filepath.Join(cg, p))
	}
	got := StrayCgroups(cfg)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("StrayCgroups (-want +got):\n%s", diff)
	}
	r := find(Run(context.Background(), cfg), "sandbox cgroups")
	if r.Status != Warn || r.Required || !strings.HasPrefix(r.Detail, "7 empty sandbox cgroups") ||
		!strings.Contains(r.Fix, "sandlot doctor --fix --state-dir "+cfg.StateDir+" --more-state-dir "+cfg.MoreStateDirs[0]) {
		t.Fatalf("check: %+v", r)
	}

	// rmdir only: on this fake (not a cgroup file system) the cgroups
	// with a cgroup.procs file are not empty directories, and stay.
	removed, err := RemoveStrayCgroups(cfg)
	slices.Sort(removed)
	var rmWant, kept []string
	for _, p := range want {
		if strings.HasSuffix(p, "sb-emptyprocs") {
			kept = append(kept, p)
		} else {
			rmWant = append(rmWant, p)
		}
	}
	if err == nil || strings.Count(err.Error(), "directory not empty") != 2 || !cmp.Equal(rmWant, removed) {
		t.Fatalf("RemoveStrayCgroups: %v %v", removed, err)
	}
	want = rmWant
	for _, p := range want {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	for _, p := range []string{"memory/sandlot/sb-young", "memory/sandlot/sb-known", "memory/sandlot/notasandbox",
		"memory/sandlot/sb-Upper", "memory/sandlot/sb-child/inner", "memory/sandlot/sb-busy/cgroup.procs",
		"memory/sandlot/sb-procslink", "memory/sandlot/sb-link", "pids/sandlot/sb-busy"} {
		if _, err := os.Lstat(filepath.Join(cg, p)); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	for _, p := range []string{"memory-victim", "pids-victim", "evil/sb-evil00000001"} {
		if _, err := os.Stat(filepath.Join(outside, p)); err != nil {
			t.Errorf("outside the hierarchy, %s removed: %v", p, err)
		}
	}
	for _, p := range kept {
		os.Remove(filepath.Join(p, "cgroup.procs"))
		os.Chtimes(p, old, old)
	}
	if removed, err := RemoveStrayCgroups(cfg); err != nil || len(removed) != 2 {
		t.Fatalf("RemoveStrayCgroups again: %v %v", removed, err)
	}
	if r := find(Run(context.Background(), cfg), "sandbox cgroups"); r.Status != OK {
		t.Fatalf("check after the removal: %+v", r)
	}
}

// TestStrayCgroupsNone: a host with no sandlot parent, and one with only
// live or owned cgroups, passes.
func TestStrayCgroupsNone(t *testing.T) {
	h := newFakeHost(t)
	cfg := h.config(t)
	if r := find(Run(context.Background(), cfg), "sandbox cgroups"); r.Status != OK || !strings.Contains(r.Detail, "no sandlot cgroups") {
		t.Fatalf("no parent: %+v", r)
	}
}

// TestStrayCgroupsHost: on this host's cgroup tree, an empty sandbox
// cgroup no state dir knows is found and removed, and one holding a
// process is left.
func TestStrayCgroupsHost(t *testing.T) {
	testenv.RequireRoot(t)
	ctl := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(ctl, "cgroup.procs")); err != nil {
		ctl = "/sys/fs/cgroup" // a v2 host
	}
	id := "sb-doctortest" + strconv.Itoa(os.Getpid())
	empty := filepath.Join(ctl, "sandlot", id+"a")
	busy := filepath.Join(ctl, "sandlot", id+"b")
	for _, d := range []string{empty, busy} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(d) })
	}
	// This process in busy, for the test's span, then back in its own
	// cgroup (not the root: the test binary may run in one of its own).
	home := ownCgroup(t, ctl)
	if err := os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(filepath.Join(ctl, home, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			t.Errorf("back to %s: %v", home, err)
		}
		if now := ownCgroup(t, ctl); now != home {
			t.Errorf("the test process ends in cgroup %s, not its own %s", now, home)
		}
	})
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{empty, busy} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// Only this test's: the host's other sandboxes are not its to touch.
	cfg := Config{StateDir: t.TempDir(), only: func(name string) bool { return strings.HasPrefix(name, id) }}
	stray := StrayCgroups(cfg)
	if !slices.Contains(stray, empty) || slices.Contains(stray, busy) {
		t.Fatalf("StrayCgroups: %v", stray)
	}
	removed, err := RemoveStrayCgroups(cfg)
	if err != nil || !slices.Contains(removed, empty) || slices.Contains(removed, busy) {
		t.Fatalf("RemoveStrayCgroups: %v %v", removed, err)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("%s: %v", empty, err)
	}
	if _, err := os.Stat(busy); err != nil {
		t.Fatalf("%s: %v", busy, err)
	}
}

// ownCgroup is this process's cgroup path (from /proc/self/cgroup) in the
// hierarchy mounted at ctl: the pids one, or v2's unified one at
// /sys/fs/cgroup.
func ownCgroup(t *testing.T, ctl string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Base(ctl) // "pids", or "cgroup" on a v2 host
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if want == "cgroup" && f[0] == "0" && f[1] == "" || slices.Contains(strings.Split(f[1], ","), want) {
			return f[2]
		}
	}
	t.Fatalf("no %s line in /proc/self/cgroup:\n%s", want, b)
	return ""
}
