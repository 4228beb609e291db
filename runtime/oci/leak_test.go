package oci

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// footprint is what a sandbox can leave on the host.
type footprint struct {
	SandboxProcs  int // processes in the cgroup of one of our sandboxes
	RuntimeProcs  int // runtime binaries using our state dir
	NSMounts      int // the crun mount-namespace thread's mounts of the state dir
	StateMounts   int // mounts anywhere that mention the state dir
	Cgroups       int // our sandboxes' cgroup dirs, all controllers
	Bundles       int
	RuntimeStates int // entries in the runtime's --root
	ChanDirs      int // runsc channel tmpfs dirs
	IDRanges      int // allocated host id ranges
	NullNodes     int // our sandboxes' null devices (null.go)
}

// countStateMounts counts the mounts of a mountinfo that mention the
// state dir.
func countStateMounts(p, stateDir string) int {
	b, err := os.ReadFile(p)
	if err != nil {
		return -1
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, stateDir) {
			n++
		}
	}
	return n
}

func countDir(p string) int {
	ents, err := os.ReadDir(p)
	if err != nil {
		return 0
	}
	return len(ents)
}

// measure counts what exists now. ids are the sandboxes this test made;
// other tests on the machine may run sandboxes of their own.
func measure(t *testing.T, r *Runtime, ids []string) footprint {
	t.Helper()
	var f footprint
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if cg, err := os.ReadFile(p + "/cgroup"); err == nil {
			for _, id := range ids {
				if bytes.Contains(cg, []byte(cgroupParent+"/"+id)) {
					f.SandboxProcs++
					break
				}
			}
		}
		if cl, err := os.ReadFile(p + "/cmdline"); err == nil && bytes.Contains(cl, []byte(r.StateDir())) {
			f.RuntimeProcs++
		}
		f.StateMounts += max(0, countStateMounts(p+"/mountinfo", r.StateDir()))
	}
	if r.Name() == KindCrun && launcher.tid != 0 {
		f.NSMounts = countStateMounts(fmt.Sprintf("/proc/self/task/%d/mountinfo", launcher.tid), r.StateDir())
	}
	for _, id := range ids {
		for _, d := range teardown.CgroupDirs(id) {
			if _, err := os.Stat(d); err == nil {
				f.Cgroups++
			}
		}
	}
	f.Bundles = countDir(filepath.Join(r.StateDir(), "bundles"))
	f.RuntimeStates = countDir(filepath.Join(r.StateDir(), r.Name()))
	f.ChanDirs = countDir(filepath.Join(r.StateDir(), "chan"))
	for _, id := range ids {
		if _, err := os.Lstat(r.nullPath(id)); err == nil {
			f.NullNodes++
		}
	}
	n, err := r.HeldIDRanges()
	if err != nil {
		t.Fatal(err)
	}
	f.IDRanges = n
	return f
}

// TestNoLeaks runs 50 create/use/delete cycles and checks that nothing
// (processes, mounts, cgroups, bundles, runtime state) is left behind.
func TestNoLeaks(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			r := newRuntime(t, kind)
			ctx := context.Background()
			var ids []string
			before := measure(t, r, nil)
			for i := 0; i < 50; i++ {
				id := runtime.NewID()
				ids = append(ids, id)
				if err := r.Create(ctx, probeSpec(t, r, id)); err != nil {
					t.Fatal(err)
				}
				if i%10 == 0 { // also exercise a live sandbox with children
					p := dialProbe(t, ctx, r, id)
					if got := p.sh(t, "sleep 60 >/dev/null 2>&1 & echo ok"); got.Out != "ok\n" {
						t.Fatalf("probe: %+v", got)
					}
					p.c.Close()
				}
				if err := r.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			// A killed init is reparented to the host's PID 1, which may
			// reap it lazily: allow the zombies a moment to go.
			after := measure(t, r, ids)
			for deadline := time.Now().Add(15 * time.Second); after != before && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
				after = measure(t, r, ids)
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("footprint changed after 50 cycles (-before +after):\n%s", diff)
			}
			t.Logf("footprint: %+v", after)
		})
	}
}
