package teardown

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestRemoveCgroupsNested: a sandbox's cgroup holding a cgroup made inside
// it, with a process in each (v1), is removed whole and both processes are
// killed (before, testenv did this itself and the delete did not: rmdir of
// the parent stayed EBUSY with no process of its own to kill until its 5 s
// bound).
func TestRemoveCgroupsNested(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
	ctl := filepath.Join(CgroupRoot, "pids")
	if UnifiedOnly() {
		ctl = CgroupRoot
	}
	id := "sb-teardown" + strconv.Itoa(os.Getpid())
	top := filepath.Join(ctl, CgroupParent, id)
	sub := filepath.Join(top, "inner")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(sub); os.Remove(top) })
	// A v2 cgroup with children holds no process itself.
	cgs := []string{top, sub}
	if UnifiedOnly() {
		cgs = cgs[1:]
	}
	var sleeps []*exec.Cmd
	for _, cg := range cgs {
		s := exec.Command("sleep", "600")
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Process.Kill(); s.Wait() })
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(s.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
		sleeps = append(sleeps, s)
	}
	if err := RemoveCgroups(context.Background(), id, CgroupDirs(id)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{sub, top} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want gone", d, err)
		}
	}
	for _, s := range sleeps {
		done := make(chan struct{})
		go func() { s.Wait(); close(done) }()
		select {
		case <-done:
			if s.ProcessState.String() != "signal: killed" {
				t.Errorf("sleep ended with %v", s.ProcessState)
			}
		case <-time.After(time.Minute):
			t.Fatal("a process of the cgroups still runs")
		}
	}
}

// TestRemoveCgroupsWithinBound: RemoveCgroupsWithin keeps trying for its
// bound, not only DefaultBound (before, the bound was fixed at 5 s and
// testenv.KillSandbox's 30 s timeout could only shorten it). A
// plain directory stands in for a busy cgroup: its rmdir fails (not
// empty) until its file is removed, after DefaultBound has passed.
func TestRemoveCgroupsWithinBound(t *testing.T) {
	d := filepath.Join(t.TempDir(), "cg")
	f := filepath.Join(d, "task")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*DefaultBound)
	defer cancel()
	freed := time.AfterFunc(DefaultBound+DefaultBound/10, func() { os.Remove(f) })
	defer freed.Stop()
	if err := RemoveCgroupsWithin(ctx, "sb-deadline", []string{d}, 10*DefaultBound); err != nil {
		t.Fatalf("RemoveCgroupsWithin gave up before its bound: %v", err)
	}
	if _, err := os.Stat(d); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want gone", d, err)
	}
}

// TestRemoveCgroupsDefaultBound: a cgroup that stays busy is given up
// after DefaultBound with an error (the delete and suspend paths), even
// under a context with a later deadline.
func TestRemoveCgroupsDefaultBound(t *testing.T) {
	d := filepath.Join(t.TempDir(), "cg")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "task"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*DefaultBound)
	defer cancel()
	if err := RemoveCgroups(ctx, "sb-bound", []string{d}); err == nil {
		t.Fatal("RemoveCgroups of a directory that stays busy succeeded")
	}
}
