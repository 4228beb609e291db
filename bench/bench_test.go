package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/runtime/oci"
)

func TestLatencyPercentiles(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	f := Latency("x", s)
	if f.N != 100 || f.P50 != 50 || f.P95 != 95 || f.P99 != 99 {
		t.Fatalf("got n=%d p50=%v p95=%v p99=%v", f.N, f.P50, f.P95, f.P99)
	}
}

func TestRunnerRatiosAndReport(t *testing.T) {
	testenv.RequireBinary(t, HostPython)
	r := Runner{Cases: []Case{
		{Name: "fixed", Group: "g", Run: func(ctx context.Context) ([]Figure, error) {
			f := Figure{Name: "fixed", P50: 1}
			return []Figure{f}, nil
		}},
		{Name: "broken", Group: "g", Run: func(ctx context.Context) ([]Figure, error) {
			return nil, context.DeadlineExceeded
		}},
	}}
	rep, err := r.Run(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	if rep.FloorP50 <= 0 || rep.FloorP50 > 50 {
		t.Fatalf("floor p50 = %v ms", rep.FloorP50)
	}
	if len(rep.Figures) != 3 {
		t.Fatalf("figures = %+v", rep.Figures)
	}
	if got := rep.Figures[1].Ratio; got <= 0 {
		t.Errorf("ratio not computed: %v", got)
	}
	if !strings.Contains(rep.Figures[2].Note, "not measured") {
		t.Errorf("broken case note = %q", rep.Figures[2].Note)
	}
	var tab, md bytes.Buffer
	rep.Table(&tab)
	rep.Markdown(&md)
	if !strings.Contains(tab.String(), "fixed") || !strings.Contains(md.String(), "| g | fixed |") {
		t.Errorf("table:\n%s\nmarkdown:\n%s", tab.String(), md.String())
	}
}

func TestBwrapPeer(t *testing.T) {
	testenv.RequireBinary(t, "bwrap")
	figs, err := BwrapPeer(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if figs[0].N != 3 || figs[0].P50 <= 0 {
		t.Fatalf("bwrap figure = %+v", figs[0])
	}
}

// TestCrunPythonPeer runs the crun floor: a container of python3 -c pass
// that must exit 0 (a failed run is an error, not a figure).
func TestCrunPythonPeer(t *testing.T) {
	testenv.RequireBinary(t, "crun")
	figs, err := CrunPythonPeer(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if figs[0].N != 3 || figs[0].P50 <= 0 {
		t.Fatalf("crun figure = %+v", figs[0])
	}
}

// TestTimePaired: both sample sets are taken, in turn, one per round.
func TestTimePaired(t *testing.T) {
	testenv.RequireBinary(t, HostPython)
	calls := 0
	samples, floor, err := TimePaired(context.Background(), 2, 20, func(context.Context) error {
		calls++
		time.Sleep(time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 20 || len(floor) != 20 || calls != 22 {
		t.Fatalf("samples %d floor %d calls %d, want 20, 20, 22", len(samples), len(floor), calls)
	}
	for i, s := range samples {
		if s < time.Millisecond {
			t.Fatalf("sample %d = %v: shorter than the call it timed", i, s)
		}
	}
}

// TestRunscPythonPeer runs runsc's floor with sandlot's runsc flags: each
// run must print python's 2 (a failed run is an error, not a figure), and
// the flags it ran with are a copy sandlot's own cannot be changed by.
func TestRunscPythonPeer(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "runsc")
	p, err := newRunscPeer()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if !slices.Contains(p.global, "--platform=systrap") || !slices.Contains(p.global, "--network=none") {
		t.Fatalf("runsc peer flags %v, want sandlot's", p.global)
	}
	p.global[0] = "--changed"
	if oci.RunscFlags()[0] == "--changed" {
		t.Fatal("oci.RunscFlags returned sandlot's own slice")
	}
	p.global = oci.RunscFlags()
	for i := 0; i < 2; i++ {
		took, err := p.sample(context.Background())
		if err != nil || took <= 0 {
			t.Fatalf("run %d: %v, %v", i, took, err)
		}
	}
	// A bundle whose python prints something else fails the run.
	p.bundle = filepath.Join(p.dir, "bundle-3")
	if err := writePeerBundle(p.bundle, []string{HostPython, "-c", "print(3)"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sample(context.Background()); err == nil || !strings.Contains(err.Error(), "want 2") {
		t.Fatalf("a run printing 3: %v, want an error", err)
	}
}
