package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// runs builds one report per floor p50, each with the floor's row first,
// then the rows rows(i) gives for run i (0-based), their ratio and verdict
// set as Runner.Run sets them.
func runs(floors []float64, rows func(i int) []Figure) []*Report {
	var out []*Report
	for i, fp := range floors {
		rep := &Report{Started: time.Date(2026, 11, 30, 23, i, 0, 0, time.UTC), Host: "h", LoadStart: "s" + string(rune('1'+i)),
			LoadEnd: "e" + string(rune('1'+i)), FloorP50: fp,
			Figures: []Figure{{Name: "floor", Group: "floor", N: 10, P50: fp, P95: fp * 2}}}
		for _, f := range rows(i) {
			f.toFloor(fp)
			rep.Figures = append(rep.Figures, f)
		}
		out = append(out, rep)
	}
	return out
}

func byName(t *testing.T, rep *Report, name string) Figure {
	t.Helper()
	for _, f := range rep.Figures {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no row %q in %+v", name, rep.Figures)
	return Figure{}
}

func boolp(b bool) *bool { return &b }

// TestAggregateOdd: of three runs, each row is its median run's whole row
// (its p95, verdict and note with it), by p50 for a latency and by value
// for a value, and the note lists every run's statistic in order and how
// many met the target. The floor and the report's floor are the median
// floor's; the runs' floors are kept in run order.
func TestAggregateOdd(t *testing.T) {
	p50 := []float64{0.289, 0.262, 0.271} // median: run 3
	val := []float64{400, 390, 410}       // median: run 1
	reps := runs([]float64{0.035, 0.040, 0.030}, func(i int) []Figure {
		return []Figure{
			{Name: "lat", Group: "g", N: 3000, P50: p50[i], P95: float64(i + 1), Target: "p50 < 0.28 ms", Met: boolp(p50[i] < 0.28), Note: "own " + string(rune('a'+i))},
			{Name: "val", Group: "g", Value: val[i], Unit: "contexts", Target: ">= 400", Met: boolp(val[i] >= 400)},
		}
	})
	rep := Aggregate(reps)
	if rep.Repeat != 3 || rep.FloorP50 != 0.035 || len(rep.RunFloorsP50) != 3 || rep.RunFloorsP50[1] != 0.040 {
		t.Errorf("repeat %d, floor %v, floors %v; want 3, 0.035 (the median run's), [0.035 0.040 0.030]", rep.Repeat, rep.FloorP50, rep.RunFloorsP50)
	}
	if rep.LoadStart != "s1" || rep.LoadEnd != "e3" {
		t.Errorf("load %s -> %s, want the first run's start and the last's end", rep.LoadStart, rep.LoadEnd)
	}
	if got := byName(t, rep, "floor"); got.P50 != 0.035 || got.Note != "median of 3 runs by p50, run 1's: 0.030, 0.035, 0.040 ms" {
		t.Errorf("floor row %+v", got)
	}
	lat := byName(t, rep, "lat")
	if lat.P95 != 3 || lat.P50 != 0.271 || lat.Ratio != round(0.271/0.030, 2) || lat.Met == nil || !*lat.Met || lat.Target != "p50 < 0.28 ms" {
		t.Errorf("lat row %+v, want run 3's, its ratio to run 3's floor", lat)
	}
	if want := "median of 3 runs by p50, run 3's: 0.262, 0.271, 0.289 ms; met in 2 of 3; own c"; lat.Note != want {
		t.Errorf("lat note\n%q, want\n%q", lat.Note, want)
	}
	v := byName(t, rep, "val")
	if v.Value != 400 || v.Met == nil || !*v.Met {
		t.Errorf("val row %+v, want run 1's", v)
	}
	if want := "median of 3 runs by value, run 1's: 390.0, 400.0, 410.0 contexts; met in 2 of 3"; v.Note != want {
		t.Errorf("val note\n%q, want\n%q", v.Note, want)
	}
	if names := len(rep.Figures); names != 3 {
		t.Errorf("%d rows, want 3: %+v", names, rep.Figures)
	}
}

// TestAggregateEven: of four runs the lower of the two middle ones is
// taken.
func TestAggregateEven(t *testing.T) {
	p50 := []float64{4, 1, 3, 2} // sorted: run 2, 4, 3, 1; lower middle: run 4
	reps := runs([]float64{0.03, 0.03, 0.03, 0.03}, func(i int) []Figure {
		return []Figure{{Name: "lat", P50: p50[i], P99: float64(10 * (i + 1))}}
	})
	lat := byName(t, Aggregate(reps), "lat")
	if lat.P50 != 2 || lat.P99 != 40 {
		t.Errorf("row %+v, want run 4's", lat)
	}
	if want := "lower median of 4 runs by p50, run 4's: 1.000, 2.000, 3.000, 4.000 ms"; lat.Note != want {
		t.Errorf("note\n%q, want\n%q", lat.Note, want)
	}
}

// TestAggregateMissing: a case that failed in one run has no figures
// there, only its "not measured" row: its figures are the median of the
// runs that measured them and say which run lacks them, and the failure's
// row stays, in its place, saying the run it is from.
func TestAggregateMissing(t *testing.T) {
	p50 := []float64{5, 0, 7, 6}
	reps := runs([]float64{0.03, 0.03, 0.03, 0.03}, func(i int) []Figure {
		if i == 1 {
			return []Figure{{Name: "case", Group: "g", Note: "not measured: boom"}, {Name: "after", P50: 1}}
		}
		return []Figure{{Name: "lat", Group: "g", P50: p50[i], P95: float64(i + 1)}, {Name: "after", P50: 1}}
	})
	rep := Aggregate(reps)
	var names []string
	for _, f := range rep.Figures {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); got != "floor,case,lat,after" {
		t.Errorf("rows %s, want floor,case,lat,after (run 2's row after the one before it there)", got)
	}
	lat := byName(t, rep, "lat")
	if lat.P95 != 4 {
		t.Errorf("lat %+v, want run 4's (the median of runs 1, 3 and 4)", lat)
	}
	if want := "in 3 of 4 runs (none in run 2); median of 3 runs by p50, run 4's: 5.000, 6.000, 7.000 ms"; lat.Note != want {
		t.Errorf("lat note\n%q, want\n%q", lat.Note, want)
	}
	c := byName(t, rep, "case")
	if want := "in 1 of 4 runs (none in runs 1, 3 and 4); run 2's, nothing measured to pick by; not measured: boom"; c.Note != want {
		t.Errorf("case note\n%q, want\n%q", c.Note, want)
	}
}

// TestAggregateWarmInTurn: the warm python row, as warmAPI makes it, is
// picked by its ratio to the floor taken in turn, not by p50 nor by its
// ratio to the run's floor (the three pick three different runs here).
func TestAggregateWarmInTurn(t *testing.T) {
	const name = "warm run_code python (1+1), Go API"
	us := func(v int) []time.Duration { return []time.Duration{time.Duration(v) * time.Microsecond} }
	warm := []int{300, 200, 250}         // p50: median run 3
	inTurnFloor := []int{100, 50, 100}   // in turn: 3.0x, 4.0x, 2.5x: median run 1
	floors := []float64{0.05, 0.05, 0.1} // x floor: 6.0, 4.0, 2.5: median run 2
	reps := runs(floors, func(i int) []Figure {
		return []Figure{warmPython(name, us(warm[i]), us(inTurnFloor[i]))}
	})
	f := byName(t, Aggregate(reps), name)
	if f.P50 != 0.3 || f.Ratio != 6 || f.Met == nil || *f.Met {
		t.Errorf("row %+v, want run 1's (3.0x the floor taken in turn; 6x its run's floor, not met)", f)
	}
	if want := "median of 3 runs by the ratio to the floor taken in turn, run 1's: 2.50x, 3.00x, 4.00x; met in 1 of 3; taken in turn"; !strings.HasPrefix(f.Note, want) {
		t.Errorf("note\n%q, want it to begin\n%q", f.Note, want)
	}
}

// TestAggregateThroughputP99: a throughput row is picked by its p99, the
// statistic of its goal.
func TestAggregateThroughputP99(t *testing.T) {
	samples := func(base, tail time.Duration) []time.Duration {
		s := make([]time.Duration, 100)
		for i := range s {
			s[i] = base
		}
		s[98], s[99] = tail, tail
		return s
	}
	base := []time.Duration{10, 12, 11} // p50: median run 3
	tail := []time.Duration{60, 45, 70} // p99: median run 1
	reps := runs([]float64{0.03, 0.03, 0.03}, func(i int) []Figure {
		return []Figure{throughputFigure(50, samples(base[i]*time.Millisecond, tail[i]*time.Millisecond), 1000, time.Second)}
	})
	f := Aggregate(reps).Figures[1]
	if f.P99 != 60 || f.P50 != 10 {
		t.Errorf("row %+v, want run 1's (p99 60 ms)", f)
	}
	if want := "median of 3 runs by p99, run 1's: 45.000, 60.000, 70.000 ms"; f.Note != want {
		t.Errorf("note\n%q, want\n%q", f.Note, want)
	}
}

// TestAggregateCrunFollowsCold: crun's own run is taken from the run of
// the cold create it is the floor of, so the two compare within a run; its
// note still gives every run's p50.
func TestAggregateCrunFollowsCold(t *testing.T) {
	us := func(ms int) []time.Duration { return []time.Duration{time.Duration(ms) * time.Millisecond} }
	cold := []float64{80, 90, 70} // median: run 1
	crun := []int{50, 60, 55}     // its own median: run 3
	reps := runs([]float64{0.03, 0.03, 0.03}, func(i int) []Figure {
		// crun's peer runs last in the suite: after the cold create.
		return []Figure{{Name: coldFirstName, P50: cold[i]}, {Name: "between", P50: 1}, crunPeerFigure(us(crun[i]))}
	})
	rep := Aggregate(reps)
	if c := byName(t, rep, coldFirstName); c.P50 != 80 {
		t.Errorf("cold row %+v, want run 1's", c)
	}
	f := byName(t, rep, crunPeerName)
	if f.P50 != 50 {
		t.Errorf("crun row %+v, want run 1's, the cold create's", f)
	}
	want := "run 1's, the run of \"" + coldFirstName + "\", which it is read beside; spread of 3 runs by p50: 50.000, 55.000, 60.000 ms"
	if f.Note != want {
		t.Errorf("note\n%q, want\n%q", f.Note, want)
	}

	// Without the cold create (--cases), crun's row is its own median.
	reps = runs([]float64{0.03, 0.03, 0.03}, func(i int) []Figure { return []Figure{crunPeerFigure(us(crun[i]))} })
	if f := byName(t, Aggregate(reps), crunPeerName); f.P50 != 55 {
		t.Errorf("crun row alone %+v, want run 3's", f)
	}
	// Nor where the cold create's row measured nothing in any run.
	reps = runs([]float64{0.03, 0.03, 0.03}, func(i int) []Figure {
		return []Figure{{Name: coldFirstName, Note: "no samples"}, crunPeerFigure(us(crun[i]))}
	})
	if f := byName(t, Aggregate(reps), crunPeerName); f.P50 != 55 {
		t.Errorf("crun row beside an unmeasured cold create %+v, want run 3's", f)
	}
}

// TestRepeatOneIsRun: one run is Run's report, and its JSON has no
// repeat fields; more runs name their count and floors, in the JSON and
// the markdown's header.
func TestRepeatOneIsRun(t *testing.T) {
	rep := &Report{FloorP50: 0.03, Figures: []Figure{{Name: "x", P50: 1}}}
	if got := Aggregate([]*Report{rep}); got != rep {
		t.Errorf("one run: %+v, want the report itself", got)
	}
	b, _ := json.Marshal(rep)
	if strings.Contains(string(b), "repeat") || strings.Contains(string(b), "runFloors") {
		t.Errorf("one run's JSON names the repeat: %s", b)
	}
	agg := Aggregate(runs([]float64{0.03, 0.04, 0.05}, func(int) []Figure { return nil }))
	b, _ = json.Marshal(agg)
	if !strings.Contains(string(b), `"repeat":3,"runFloorsP50Ms":[0.03,0.04,0.05]`) {
		t.Errorf("three runs' JSON: %s", b)
	}
	var md bytes.Buffer
	agg.Markdown(&md)
	if s := md.String(); !strings.Contains(s, "`sandlot bench --json --repeat 3`") || !strings.Contains(s, "p50 0.030, 0.040, 0.050 ms by run") {
		t.Errorf("markdown header:\n%s", s)
	}
	if _, err := (&Runner{}).Repeat(context.Background(), 1, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("repeat 0: %v", err)
	}
}
