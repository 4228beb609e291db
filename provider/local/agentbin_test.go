package local

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestUnusedCopiesRemoved: a copy unused for a day goes at the next
// install, a recent one stays; on a share less than a quarter free, copies
// unused for a few hours go too (a developer's host fills the share with
// builds long before a day is over).
func TestUnusedCopiesRemoved(t *testing.T) {
	testenv.RequireRoot(t)
	share := t.TempDir()
	// A small tmpfs of its own, so "free" is the test's to set.
	if err := unix.Mount("t", share, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(share, unix.MNT_DETACH) })
	dir := filepath.Join(share, "agent")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	write := func(name string, size int, age time.Duration) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, size), 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	day := write("sandlot-agent-day", 1<<10, agentTTL+time.Minute)
	hours := write("sandlot-agent-hours", 1<<10, agentTTLLow+time.Minute)
	fresh := write("sandlot-agent-fresh", 1<<10, time.Minute)
	removeUnused(dir, unusedCutoff(dir, now))
	if exists(day) || !exists(hours) || !exists(fresh) {
		t.Fatalf("roomy share: day copy kept=%v, hours copy kept=%v, fresh kept=%v; want false, true, true", exists(day), exists(hours), exists(fresh))
	}

	// Fill the share past three quarters.
	write("sandlot-agent-big", 3<<20+512<<10, time.Minute)
	removeUnused(dir, unusedCutoff(dir, now))
	if exists(hours) || !exists(fresh) {
		t.Fatalf("full share: hours copy kept=%v, fresh kept=%v; want false, true", exists(hours), exists(fresh))
	}
}
