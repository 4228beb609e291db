package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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
	figs, err := cold(context.Background(), env, Sizes{Cold: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 4 {
		t.Fatalf("%d figures, want 4: %+v", len(figs), figs)
	}
	r := figs[3]
	t.Logf("%s: %.2f%s, %s", r.Name, r.Value, r.Unit, r.Note)
	if r.Name != coldAgainstCrunName || r.Value <= 0 || r.Met == nil || !strings.Contains(r.Note, "n 3)") {
		t.Errorf("ratio row: %+v", r)
	}
	env.Runtime = "runc"
	if figs, err = cold(context.Background(), env, Sizes{Cold: 1}); err != nil || len(figs) != 3 {
		t.Errorf("under another runtime: %d figures (%v), want 3: crun's run is the floor of crun's creates only", len(figs), err)
	}
}
