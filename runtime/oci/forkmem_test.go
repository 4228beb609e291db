package oci

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/runtime"
)

// TestRestoreIntoAnotherSandbox records what a fork with memory would rest
// on (docs/state.md, "Fork with memory"): runsc refuses to restore sandbox
// A's checkpoint into sandbox B, whose host id range is its own ("UIDMappings"
// does not match), under its default --restore-spec-validation=enforce.
// With =warning (the check logged, not enforced: gVisor has no finer
// switch) the restore runs A's process on in B (its count goes on from
// A's), and what it writes on the host is owned by B's range, not A's: the
// in-sandbox ids are the kernel's, saved with it; the host ids are the
// restoring sandbox's. So "one host id range per sandbox" would hold.
func TestRestoreIntoAnotherSandbox(t *testing.T) {
	r := newRuntime(t, KindRunsc)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, b := runtime.NewID(), runtime.NewID()
	start := func(id string) {
		if err := r.Create(ctx, counterSpec(id)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Delete(context.Background(), id) })
	}
	// B counts a little and stops; A counts far past it, then stops.
	start(b)
	waitCount(t, r, b, 2, -1)
	if err := r.Checkpoint(ctx, b, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	savedB := waitCount(t, r, b, 0, -1)
	start(a)
	waitCount(t, r, a, savedB+100, -1)
	img := t.TempDir()
	if err := r.Checkpoint(ctx, a, img); err != nil {
		t.Fatal(err)
	}
	savedA := waitCount(t, r, a, 0, -1)

	err := r.Restore(ctx, b, img)
	if err == nil || !strings.Contains(err.Error(), `"UIDMappings" does not match`) {
		t.Fatalf("restore of A's checkpoint into B under enforce = %v, want the UIDMappings refusal", err)
	}

	// gVisor reopens by path every host file the saved kernel held: the
	// counter's (n, or n.tmp if it was caught writing) must be in B's
	// channel directory too, as a fork's root would hold the source's files.
	if err := r.reopenChannel(b); err != nil {
		t.Fatal(err)
	}
	ra, _ := r.IDRange(a)
	rb, _ := r.IDRange(b)
	for _, name := range []string{"n", "n.tmp"} {
		src := filepath.Join(r.chanDir(a), name)
		fi, err := os.Stat(src)
		if err != nil {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(r.chanDir(b), name)
		st := fi.Sys().(*syscall.Stat_t)
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// Its owner in B's range, as a fork's copy would be.
		if err := os.Chown(dst, int(st.Uid-ra.Base+rb.Base), int(st.Gid-ra.Base+rb.Base)); err != nil {
			t.Fatal(err)
		}
	}
	old := runscFlags
	runscFlags = append(append([]string(nil), runscFlags...), "--restore-spec-validation=warning")
	defer func() { runscFlags = old }()
	if err := r.Restore(ctx, b, img); err != nil {
		t.Fatalf("restore of A's checkpoint into B under warning: %v", err)
	}
	// The copied file reads A's last count until the restored process writes:
	// wait for the first count that is not it.
	next := waitCount(t, r, b, 0, savedA)
	if next <= savedA {
		t.Fatalf("B counts %d after the restore, want above A's %d (B had %d): not A's process", next, savedA, savedB)
	}
	fi, err := os.Stat(filepath.Join(r.chanDir(b), "n"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	t.Logf("A's process goes on in B: %d after %d; A's range %+v, B's %+v; the file it wrote in B is owned by %d:%d", next, savedA, ra, rb, st.Uid, st.Gid)
	in := func(id uint32, rg IDRange) bool { return id >= rg.Base && id < rg.Base+rg.Size }
	if !in(st.Uid, rb) || !in(st.Gid, rb) || in(st.Uid, ra) {
		t.Fatalf("the file A's process wrote in B is owned by %d:%d, want B's range %+v (A's is %+v)", st.Uid, st.Gid, rb, ra)
	}
}
