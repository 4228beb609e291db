package local

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/runtime/oci"
)

// hostFootprint counts what sandboxes can leave on the host. Only our own
// sandboxes' processes and cgroups count: other tests may run beside us.
type hostFootprint struct {
	Procs, Cgroups, Mounts, Bundles, ChanDirs, IDRanges, RuntimeStates int
}

func footprintOf(p *Provider, ids []string) hostFootprint {
	var f hostFootprint
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, pr := range procs {
		cg, err := os.ReadFile(pr + "/cgroup")
		if err == nil {
			for _, id := range ids {
				if bytes.Contains(cg, []byte("/sandlot/"+id)) {
					f.Procs++
					break
				}
			}
		}
		if mi, err := os.ReadFile(pr + "/mountinfo"); err == nil {
			f.Mounts += strings.Count(string(mi), p.stateDir)
		}
	}
	ctls, _ := os.ReadDir("/sys/fs/cgroup")
	for _, c := range ctls {
		for _, id := range ids {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c.Name(), "sandlot", id)); err == nil {
				f.Cgroups++
			}
		}
	}
	n := func(d string) int { e, _ := os.ReadDir(filepath.Join(p.stateDir, d)); return len(e) }
	f.Bundles, f.ChanDirs, f.RuntimeStates = n("bundles"), n("chan"), n(p.Runtime().Name())
	if r, ok := p.Runtime().(*oci.Runtime); ok {
		n, err := r.HeldIDRanges()
		if err != nil {
			n = -1 // shows as a difference
		}
		f.IDRanges = n
	}
	return f
}

// TestNoLeaks: 50 create/use/destroy cycles with the real agent leave no
// process, mount, cgroup, bundle, channel dir, id range or runtime state
// behind.
func TestNoLeaks(t *testing.T) {
	for _, kind := range []string{"auto", "runsc"} {
		t.Run(kind, func(t *testing.T) { testNoLeaks(t, kind) })
	}
}

func testNoLeaks(t *testing.T, kind string) {
	p := newProvider(t, kind, contexts.Limits{})
	ctx := context.Background()
	before := footprintOf(p, nil)
	var ids []string
	for i := 0; i < 50; i++ {
		sb, err := p.Create(ctx, contexts.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID())
		if i%10 == 0 { // a kernel and a background process too
			if r := runCode(t, sb.(*Sandbox).Client, "python", "import subprocess; subprocess.Popen(['sleep', '60']); 1"); !r.Success {
				t.Fatalf("python: %+v", r)
			}
		}
		sb.Close()
		if err := p.Destroy(ctx, sb.ID()); err != nil {
			t.Fatal(err)
		}
	}
	// Killed inits are reaped by the host's PID 1, maybe lazily.
	after := footprintOf(p, ids)
	for deadline := time.Now().Add(15 * time.Second); after != before && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		after = footprintOf(p, ids)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("footprint after 50 cycles (-before +after):\n%s", diff)
	}
}
