package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/provider/local/localtest"
)

// TestColdAgainstCrun: the ratio row is the cold first result's p50 over
// crun's run taken in turn, judged against the 1.3x bound, and says so
// when crun's run was not taken.
func TestColdAgainstCrun(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x * float64(time.Millisecond))
		}
		return out
	}
	crun := ms(19, 20, 21)
	for _, c := range []struct {
		first float64
		ratio float64
		met   bool
	}{{26, 1.3, true}, {27, 1.35, false}, {18, 0.9, true}} {
		f := coldAgainstCrun(Figure{P50: c.first}, crun, nil)
		if f.Value != c.ratio || f.Unit != "x" || f.Met == nil || *f.Met != c.met || f.Target != "<= 1.3x" {
			t.Errorf("first %.0f ms against crun's 20: %+v, want %.2fx, met %v", c.first, f, c.ratio, c.met)
		}
		if !strings.Contains(f.Note, "p50 20.000 ms") || !strings.HasPrefix(f.Note, fmt.Sprintf("%.2fx: ", c.ratio)) {
			t.Errorf("note %q does not give crun's p50", f.Note)
		}
	}
	f := coldAgainstCrun(Figure{P50: 26}, nil, errors.New("crun not installed"))
	if f.Met != nil || f.Value != 0 || f.Note != "not measured: crun not installed" {
		t.Errorf("without crun's run: %+v", f)
	}
}

// TestColdRows runs the cold case at a small size on crun: the ratio row
// is measured from crun's run taken in turn, one per create.
func TestColdRows(t *testing.T) {
	env := crunEnv(t)
	env.Runtime = RuntimeCrun
	_, r := coldRatioRow(t, env, 3)
	if r.Name != coldAgainstCrunName || r.Value <= 0 || r.Met == nil || !strings.Contains(r.Note, "n 3)") {
		t.Errorf("ratio row: %+v", r)
	}
	env.Runtime = "runc"
	if figs, err := cold(context.Background(), env, Sizes{Cold: 1}); err != nil || len(figs) != 3 {
		t.Errorf("under another runtime: %d figures (%v), want 3: crun's run is the floor of crun's creates only", len(figs), err)
	}
}

// TestColdAgainstRunsc: under runsc the ratio row is the cold first
// result's p50 over runsc's own run taken in turn, with no goal of its
// own (the cold row's absolute goal stands), naming that goal.
func TestColdAgainstRunsc(t *testing.T) {
	runs := []time.Duration{180 * time.Millisecond, 200 * time.Millisecond, 220 * time.Millisecond}
	f := coldAgainstRunsc(Figure{P50: 270}, runs, nil)
	if f.Name != coldAgainstRunscName || f.Value != 1.35 || f.Unit != "x" || f.Met != nil || f.Target != "" {
		t.Errorf("270 ms against runsc's 200: %+v, want 1.35x and no target", f)
	}
	if !strings.Contains(f.Note, "p50 200.000 ms") || !strings.Contains(f.Note, "goal is 150 ms") || !strings.Contains(f.Note, "n 3)") {
		t.Errorf("note %q does not give runsc's p50, its count and the cold row's goal", f.Note)
	}
	f = coldAgainstRunsc(Figure{P50: 270}, nil, errors.New("runsc not installed"))
	if f.Value != 0 || f.Note != "not measured: runsc not installed" {
		t.Errorf("without runsc's run: %+v", f)
	}
}

// TestColdRowsRunsc runs the cold case at a small size on runsc: its
// ratio row is measured from runsc's own run (sandlot's flags) taken in
// turn, one per create, and crun's row is not there.
func TestColdRowsRunsc(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "runsc")
	p := localtest.New(t, local.Config{Runtime: "runsc"})
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Provider: p, Guard: g, Runtime: RuntimeRunsc}
	figs, r := coldRatioRow(t, env, 2)
	if r.Name != coldAgainstRunscName || r.Value <= 0 || r.Met != nil || !strings.Contains(r.Note, "n 2)") {
		t.Errorf("ratio row: %+v", r)
	}
	if figs[1].Target != "p50 < 150 ms" {
		t.Errorf("cold row under runsc: %+v, want runsc's goal", figs[1])
	}
	if ids, _ := p.List(context.Background()); len(ids) != 0 {
		t.Errorf("sandboxes left running: %v", ids)
	}
}

// coldRatioRow runs the cold case on env with n creates and returns its
// rows and the last, the ratio to the runtime's own run.
func coldRatioRow(t *testing.T, env Env, n int) ([]Figure, Figure) {
	t.Helper()
	figs, err := cold(context.Background(), env, Sizes{Cold: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 4 {
		t.Fatalf("%d figures, want 4: %+v", len(figs), figs)
	}
	r := figs[3]
	t.Logf("%s: %.2f%s, %s", r.Name, r.Value, r.Unit, r.Note)
	return figs, r
}
