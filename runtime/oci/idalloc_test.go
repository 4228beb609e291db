package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestIDAllocatorAcrossStateDirs: two daemons with different state dirs
// (and one with a base that does not line up with theirs) on one host never
// hold overlapping host ids.
func TestIDAllocatorAcrossStateDirs(t *testing.T) {
	etc := fakeEtc(t, map[string]string{})
	host := hostIDDir(t)
	var got []IDRange
	for i, base := range []uint32{DefaultIDBase, DefaultIDBase, DefaultIDBase + IDRangeSize/2} {
		a, err := newIDAllocatorEtc(t.TempDir(), host, etc, base, 8)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			r, err := a.alloc("sb-" + strconv.Itoa(i) + "-" + strconv.Itoa(j))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
	}
	for i, r := range got {
		for _, o := range got[:i] {
			if r.Contains(o.Base) || o.Contains(r.Base) {
				t.Errorf("ranges %+v and %+v of two state dirs overlap", o, r)
			}
		}
	}
}

// TestIDRebuildOtherStateDirs: a daemon's rebuild and free touch only its
// own state dir's files: another daemon's range stays held even when this
// daemon has no bundle for it, and a range of ours that another state dir
// holds (two daemons of the per-state-dir version) is reported, not taken.
// A state dir that no longer exists holds nothing.
func TestIDRebuildOtherStateDirs(t *testing.T) {
	etc := fakeEtc(t, map[string]string{})
	host := hostIDDir(t)
	mine, theirs := t.TempDir(), t.TempDir()
	gone := filepath.Join(t.TempDir(), "removed")
	a, err := newIDAllocatorEtc(mine, host, etc, DefaultIDBase, 8)
	if err != nil {
		t.Fatal(err)
	}
	name := func(k int) string { return filepath.Join(host, strconv.Itoa(DefaultIDBase+k*IDRangeSize)) }
	writeRecord(t, name(0), theirs, "their-live")
	writeRecord(t, name(1), theirs, "their-conflict")
	writeRecord(t, name(2), gone, "orphan")
	writeRecord(t, name(3), mine, "my-stale")
	old := time.Now().Add(-time.Hour)
	for k := range 4 {
		os.Chtimes(name(k), old, old)
	}
	bundles := map[string]string{
		"my-live":     writeConfig(t, mine, "my-live", DefaultIDBase+4*IDRangeSize),
		"my-conflict": writeConfig(t, mine, "my-conflict", DefaultIDBase+1*IDRangeSize),
	}
	conflicts, err := a.rebuild(bundles)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]IDRange{"my-conflict": {DefaultIDBase + IDRangeSize, IDRangeSize}}, conflicts); diff != "" {
		t.Errorf("conflicts (-want +got):\n%s", diff)
	}
	want := map[int]idRecord{0: {theirs, "their-live"}, 1: {theirs, "their-conflict"}, 4: {mine, "my-live"}}
	if diff := cmp.Diff(want, records(t, host, DefaultIDBase)); diff != "" {
		t.Errorf("after rebuild (-want +got):\n%s", diff)
	}
	// Freeing another state dir's range under its owner's name does nothing.
	if err := a.free("their-live", IDRange{DefaultIDBase, IDRangeSize}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(name(0)); err != nil {
		t.Errorf("another state dir's range was freed: %v", err)
	}
	if n, err := a.held(); err != nil || n != 1 {
		t.Errorf("held = %d, %v; want 1", n, err)
	}
	// The next range handed out skips theirs and ours.
	if r, err := a.alloc("next"); err != nil || r.Base != DefaultIDBase+2*IDRangeSize {
		t.Errorf("alloc = %+v, %v; want the range from %d", r, err, DefaultIDBase+2*IDRangeSize)
	}
	// Purge frees this state dir's ranges and nobody else's.
	if err := freeState(host, mine); err != nil {
		t.Fatal(err)
	}
	want = map[int]idRecord{0: {theirs, "their-live"}, 1: {theirs, "their-conflict"}}
	if diff := cmp.Diff(want, records(t, host, DefaultIDBase)); diff != "" {
		t.Errorf("after freeState (-want +got):\n%s", diff)
	}
}

// TestIDDirHostile: the allocation dir must be a directory of ours, mode
// 0700; a symlink in its place, or one planted at a file's name or at the
// lock, is never followed.
func TestIDDirHostile(t *testing.T) {
	etc := fakeEtc(t, map[string]string{})
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, dir string)
	}{
		{"symlink", func(t *testing.T, dir string) { must(t, os.Symlink(t.TempDir(), dir)) }},
		{"mode 0755", func(t *testing.T, dir string) { must(t, os.Mkdir(dir, 0o755)); must(t, os.Chmod(dir, 0o755)) }},
		{"other owner", func(t *testing.T, dir string) { must(t, os.Mkdir(dir, 0o700)); must(t, os.Chown(dir, 4321, 4321)) }},
		{"file", func(t *testing.T, dir string) { must(t, os.WriteFile(dir, nil, 0o700)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "other owner" {
				testenv.RequireRoot(t) // to chown
			}
			dir := hostIDDir(t)
			tc.plant(t, dir)
			if _, err := newIDAllocatorEtc(t.TempDir(), dir, etc, 0, 4); !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Errorf("allocation dir %s: %v, want failed_precondition", tc.name, err)
			}
		})
	}

	t.Run("replaced after start", func(t *testing.T) {
		dir := hostIDDir(t)
		a, err := newIDAllocatorEtc(t.TempDir(), dir, etc, 0, 4)
		if err != nil {
			t.Fatal(err)
		}
		must(t, os.RemoveAll(dir))
		must(t, os.Symlink(t.TempDir(), dir))
		if _, err := a.alloc("sb"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Errorf("alloc in a dir replaced by a symlink: %v, want failed_precondition", err)
		}
	})

	t.Run("planted files", func(t *testing.T) {
		dir, state := hostIDDir(t), t.TempDir()
		a, err := newIDAllocatorEtc(state, dir, etc, 0, 4)
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(t.TempDir(), "victim")
		must(t, os.WriteFile(target, []byte("keep"), 0o600))
		must(t, os.Symlink(target, filepath.Join(dir, strconv.Itoa(DefaultIDBase))))
		r, err := a.alloc("sb")
		if err != nil || r.Base != DefaultIDBase+IDRangeSize {
			t.Errorf("alloc past a planted symlink = %+v, %v; want the second range", r, err)
		}
		// A bundle claims the planted name: reported, the symlink not followed.
		c, err := a.rebuild(map[string]string{"sb0": writeConfig(t, state, "sb0", DefaultIDBase)})
		if err != nil || len(c) != 1 {
			t.Errorf("rebuild over a planted symlink: conflicts %v, %v; want one", c, err)
		}
		if b, _ := os.ReadFile(target); string(b) != "keep" {
			t.Errorf("the symlink's target was written: %q", b)
		}
		must(t, os.Remove(filepath.Join(dir, ".lock")))
		must(t, os.Symlink(target, filepath.Join(dir, ".lock")))
		if _, err := a.alloc("sb2"); err == nil {
			t.Error("alloc took a lock through a planted symlink")
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTwoRuntimesIDs: sandboxes of two runtimes with different state dirs
// on this host get different host id ranges.
func TestTwoRuntimesIDs(t *testing.T) {
	ctx := context.Background()
	seen := map[uint32]string{}
	for i := range 2 {
		r := newRuntime(t, KindCrun)
		id := createProbe(t, ctx, r)
		rng, err := r.IDRange(id)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[rng.Base]; ok {
			t.Errorf("runtime %d's sandbox has host ids from %d, as %s of the other state dir", i, rng.Base, prev)
		}
		seen[rng.Base] = r.StateDir()
	}
}

// TestIDRangesAfterReboot: a reboot empties /run, and with it the
// allocation; a daemon's start brings back the range of each of its
// bundles. The runtime has a share of its own, so that wiping its ids/
// opens no window in which another process on this host takes the range.
func TestIDRangesAfterReboot(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, KindCrun)
	ctx := context.Background()
	state := t.TempDir()
	// The sandbox's root user must search its way to the share's rootfs.
	share, err := os.MkdirTemp("/run", "sl-share-")
	must(t, err)
	must(t, os.Chmod(share, 0o711))
	t.Cleanup(func() {
		unix.Unmount(share, unix.MNT_DETACH)
		os.RemoveAll(share)
		os.Remove(share + ".lock")
	})
	r, err := New(ctx, Config{Runtime: KindCrun, StateDir: state, ShareDir: share})
	if err != nil {
		t.Fatal(err)
	}
	id := createProbe(t, ctx, r)
	t.Cleanup(func() {
		if err := r.Delete(ctx, id); err != nil {
			t.Error(err)
		}
	})
	rng, err := r.IDRange(id)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.RemoveAll(filepath.Join(share, idsDir)))
	if _, err := New(ctx, Config{Runtime: KindCrun, StateDir: state, ShareDir: share}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(share, idsDir, strconv.FormatUint(uint64(rng.Base), 10))
	rec, ok := readIDRecord(file)
	if want := (idRecord{State: r.StateDir(), Owner: id}); !ok || rec != want {
		t.Errorf("after a reboot the range's record is %+v (%v), want %+v", rec, ok, want)
	}
}

// BenchmarkIDAlloc: an alloc and a free with 200 ranges held by another
// state dir (what a create and a delete pay).
func BenchmarkIDAlloc(b *testing.B) {
	host := filepath.Join(b.TempDir(), "ids")
	a, err := newIDAllocatorEtc(b.TempDir(), host, "/nonexistent", 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	other, err := newIDAllocatorEtc(b.TempDir(), host, "/nonexistent", 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		if _, err := other.alloc("o" + strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		r, err := a.alloc("sb")
		if err != nil {
			b.Fatal(err)
		}
		if err := a.free("sb", r); err != nil {
			b.Fatal(err)
		}
	}
}
