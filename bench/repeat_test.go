package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard/entitycorpus"
	"github.com/sandlot/sandlot/internal/testenv"
)

// runs builds one report per floor p50, each with the floor's row first,
// then the rows rows(i) gives for run i (0-based), their ratio and verdict
// set as Runner.Run sets them.
func runs(floors []float64, rows func(i int) []Figure) []*Report {
	var out []*Report
	for i, fp := range floors {
		rep := &Report{Started: time.Date(2026, 11, 30, 23, i, 0, 0, time.UTC), Host: "h", LoadStart: "s" + string(rune('1'+i)),
			LoadEnd: "e" + string(rune('1'+i)), FloorP50: fp,
			Figures: []Figure{{Name: "floor", Group: "floor", N: 10, P50: fp, P95: fp * 2, of: "floor"}}}
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

func names(rep *Report) string {
	var s []string
	for _, f := range rep.Figures {
		s = append(s, f.Name)
	}
	return strings.Join(s, ",")
}

func boolp(b bool) *bool { return &b }

func us(v int) []time.Duration { return []time.Duration{time.Duration(v) * time.Microsecond} }

// TestAggregateOdd: of three runs, each case's row is its median run's
// whole row (its p95, verdict and note with it), by p50 for a latency and
// by value for a value, and the note lists every run's statistic, low to
// high, and how many met the target. The floor and the report's floor are
// the median floor's; the runs' floors are kept in run order.
func TestAggregateOdd(t *testing.T) {
	p50 := []float64{0.289, 0.262, 0.271} // median: run 3
	val := []float64{400, 390, 410}       // median: run 1
	reps := runs([]float64{0.035, 0.040, 0.030}, func(i int) []Figure {
		return []Figure{
			{Name: "lat", Group: "g", N: 3000, P50: p50[i], P95: float64(i + 1), Target: "p50 < 0.28 ms", Met: boolp(p50[i] < 0.28), Note: "own " + string(rune('a'+i)), of: "A"},
			{Name: "val", Group: "g", Value: val[i], Unit: "contexts", Target: ">= 400", Met: boolp(val[i] >= 400), of: "B"},
		}
	})
	rep := Aggregate(reps)
	if rep.Repeat != 3 || rep.Completed != 3 || rep.FloorP50 != 0.035 || len(rep.RunFloorsP50) != 3 || rep.RunFloorsP50[1] != 0.040 {
		t.Errorf("repeat %d (%d completed), floor %v, floors %v; want 3, 0.035 (the median run's), [0.035 0.040 0.030]", rep.Repeat, rep.Completed, rep.FloorP50, rep.RunFloorsP50)
	}
	if rep.LoadStart != "s1" || rep.LoadEnd != "e3" {
		t.Errorf("load %s -> %s, want the first run's start and the last's end", rep.LoadStart, rep.LoadEnd)
	}
	if got := byName(t, rep, "floor"); got.P50 != 0.035 || got.Note != "run 1 of 3, the median by its p50: 0.030, 0.035, 0.040 ms" {
		t.Errorf("floor row %+v", got)
	}
	lat := byName(t, rep, "lat")
	if lat.P95 != 3 || lat.P50 != 0.271 || lat.Ratio != round(0.271/0.030, 2) || lat.Met == nil || !*lat.Met || lat.Target != "p50 < 0.28 ms" {
		t.Errorf("lat row %+v, want run 3's, its ratio to run 3's floor", lat)
	}
	if want := "run 3 of 3, the median by its p50: 0.262, 0.271, 0.289 ms; met in 2 of 3; own c"; lat.Note != want {
		t.Errorf("lat note\n%q, want\n%q", lat.Note, want)
	}
	v := byName(t, rep, "val")
	if v.Value != 400 || v.Met == nil || !*v.Met {
		t.Errorf("val row %+v, want run 1's", v)
	}
	if want := "run 1 of 3, the median by its value: 390.0, 400.0, 410.0 contexts; met in 2 of 3"; v.Note != want {
		t.Errorf("val note\n%q, want\n%q", v.Note, want)
	}
	if got := names(rep); got != "floor,lat,val" {
		t.Errorf("rows %s", got)
	}
}

// TestAggregateCase: the rows of one case come from one run, the median by
// the case's main figure (its first with a target), though another row's
// own median is another run; without a target the first row leads.
func TestAggregateCase(t *testing.T) {
	create := []float64{30, 50, 40} // own median: run 3
	first := []float64{80, 70, 90}  // the main figure (the target): median run 1
	call := []float64{5, 6, 7}      // own median: run 2
	reps := runs([]float64{0.03, 0.03, 0.03}, func(i int) []Figure {
		return []Figure{
			{Name: "create", P50: create[i], of: "cold"},
			WithTarget(Figure{Name: "first", P50: first[i], of: "cold"}, "p50 < 85 ms", first[i] < 85),
			{Name: "call", P50: call[i], of: "cold"},
			{Name: "plain", P50: call[i], of: "pair"},
			{Name: "other", P50: create[i], of: "pair"},
		}
	})
	rep := Aggregate(reps)
	for name, want := range map[string]float64{"create": 30, "first": 80, "call": 5, "plain": 6, "other": 50} {
		if got := byName(t, rep, name).P50; got != want {
			t.Errorf("%s: p50 %v, want %v", name, got, want)
		}
	}
	if want := "run 1 of 3, the median by its p50: 70.000, 80.000, 90.000 ms; met in 2 of 3"; byName(t, rep, "first").Note != want {
		t.Errorf("first note\n%q, want\n%q", byName(t, rep, "first").Note, want)
	}
	if want := `from run 1, the run of "first"`; byName(t, rep, "create").Note != want {
		t.Errorf("create note\n%q, want\n%q", byName(t, rep, "create").Note, want)
	}
	if got := names(rep); got != "floor,create,first,call,plain,other" {
		t.Errorf("rows %s", got)
	}
}

// TestAggregateEven: of an even count (a repetition cut short) the run of
// the two middle ones whose main figure missed its goal is taken when
// they disagree, else the lower.
func TestAggregateEven(t *testing.T) {
	p50 := []float64{4, 1, 3, 2} // by p50: runs 2, 4, 3, 1; middle: runs 4 and 3
	for _, tc := range []struct {
		goal     float64
		want     float64
		wantNote string
	}{
		{10, 2, "run 4 of 4, the lower of the two middle runs (4 and 3) by its p50: 1.000, 2.000, 3.000, 4.000 ms; met in 4 of 4"},
		{2.5, 3, "run 3 of 4, of the two middle runs (4 and 3) the one that missed its goal by its p50: 1.000, 2.000, 3.000, 4.000 ms; met in 2 of 4"},
	} {
		reps := runs([]float64{0.03, 0.03, 0.03, 0.03}, func(i int) []Figure {
			return []Figure{WithTarget(Figure{Name: "lat", P50: p50[i], P99: float64(10 * (i + 1)), of: "c"}, "", p50[i] < tc.goal)}
		})
		lat := byName(t, Aggregate(reps), "lat")
		if lat.P50 != tc.want || lat.Note != tc.wantNote {
			t.Errorf("goal %v: p50 %v, note\n%q; want %v,\n%q", tc.goal, lat.P50, lat.Note, tc.want, tc.wantNote)
		}
	}
}

// TestAggregateMissing: a case that failed in one run has only its "not
// measured" row there: its rows are the median run's of the others, the
// note says which run lacks them, and the failure's row, not of that run,
// is left out.
func TestAggregateMissing(t *testing.T) {
	p50 := []float64{5, 0, 7, 6}
	reps := runs([]float64{0.03, 0.03, 0.03, 0.03}, func(i int) []Figure {
		if i == 1 {
			return []Figure{{Name: "case", Group: "g", Note: "not measured: boom", of: "case"}, {Name: "after", P50: 1, of: "after"}}
		}
		return []Figure{{Name: "lat", Group: "g", P50: p50[i], P95: float64(i + 1), of: "case"}, {Name: "after", P50: 1, of: "after"}}
	})
	rep := Aggregate(reps)
	if got := names(rep); got != "floor,lat,after" {
		t.Errorf("rows %s, want floor,lat,after", got)
	}
	lat := byName(t, rep, "lat")
	if lat.P95 != 4 {
		t.Errorf("lat %+v, want run 4's (the median of runs 1, 3 and 4)", lat)
	}
	if want := "run 4 of 4, the median by its p50: 5.000, 6.000, 7.000 ms; measured in 3 of 4 runs (not in run 2)"; lat.Note != want {
		t.Errorf("lat note\n%q, want\n%q", lat.Note, want)
	}
	// Failed in every run: run 1's failure row, saying so.
	reps = runs([]float64{0.03, 0.03, 0.03}, func(i int) []Figure {
		return []Figure{{Name: "case", Note: "not measured: boom", of: "case"}}
	})
	if c := byName(t, Aggregate(reps), "case"); c.Note != "not measured in any of 3 runs; not measured: boom" {
		t.Errorf("case note %q", c.Note)
	}
}

// TestAggregateWarmRatio: the warm python row, as warmAPI makes it, is
// picked by its ratio to its run's floor, what its verdict is on, not by
// p50 nor by its ratio to the floor taken in turn (the three pick three
// different runs here); its note keeps that run's in-turn ratio.
func TestAggregateWarmRatio(t *testing.T) {
	const name = "warm run_code python (1+1), Go API"
	warm := []int{300, 200, 250}         // p50: median run 3
	inTurnFloor := []int{100, 50, 100}   // in turn: 3.0x, 4.0x, 2.5x: median run 1
	floors := []float64{0.05, 0.05, 0.1} // x floor: 6.0, 4.0, 2.5: median run 2
	reps := runs(floors, func(i int) []Figure {
		f := warmPython(name, us(warm[i]), us(inTurnFloor[i]))
		f.of = "warm"
		return []Figure{f, {Name: "warm run_code bash", P50: 1, of: "warm"}}
	})
	f := byName(t, Aggregate(reps), name)
	if f.P50 != 0.2 || f.Ratio != 4 || f.Met == nil || *f.Met {
		t.Errorf("row %+v, want run 2's (4x its run's floor, not met)", f)
	}
	want := "run 2 of 3, the median by its ratio to its run's floor: 2.50x, 4.00x, 6.00x; met in 1 of 3; " +
		"taken in turn with the floor's REPL: its p50 then 0.050 ms, this p50 4.00x that"
	if f.Note != want {
		t.Errorf("note\n%q, want\n%q", f.Note, want)
	}
}

// TestAggregateCrunFollowsCold: crun's own run is taken from the run of
// the cold create's case, so the two compare within a run; where that run
// did not measure crun, or there is no cold create, it is crun's own
// median and the note says why.
func TestAggregateCrunFollowsCold(t *testing.T) {
	cold := []float64{80, 90, 70} // median: run 1
	crun := []int{50, 60, 55}     // its own median: run 3
	peer := func(i int) Figure {
		f := crunPeerFigure(us(crun[i] * 1000))
		f.of = "peer: crun"
		if crun[i] == 0 {
			f = Figure{Name: "peer: crun", Note: "not measured: boom", of: "peer: crun", follows: coldFirstName}
		}
		return f
	}
	mk := func(coldRow func(i int) Figure) *Report {
		return Aggregate(runs([]float64{0.03, 0.03, 0.03}, func(i int) []Figure {
			out := []Figure{{Name: "between", P50: 1, of: "between"}, peer(i)}
			if coldRow != nil {
				out = append([]Figure{coldRow(i)}, out...)
			}
			return out
		}))
	}
	measuredCold := func(i int) Figure { return Figure{Name: coldFirstName, P50: cold[i], of: "cold"} }
	f := byName(t, mk(measuredCold), crunPeerName)
	want := "run 1 of 3, the run of \"" + coldFirstName + "\", which it is read beside; its own p50 by run, low to high: 50.000, 55.000, 60.000 ms"
	if f.P50 != 50 || f.Note != want {
		t.Errorf("crun row %v, note\n%q; want run 1's,\n%q", f.P50, f.Note, want)
	}

	own := "run 3 of 3, the median by its p50: 50.000, 55.000, 60.000 ms"
	for _, tc := range []struct {
		name string
		crun []int
		cold func(i int) Figure
		want float64
		note string
	}{
		{"no cold create", []int{50, 60, 55}, nil, 55, own + `; its own median: "` + coldFirstName + `" is not in this report`},
		{"cold create measured nothing", []int{50, 60, 55}, func(i int) Figure { return Figure{Name: coldFirstName, Note: "no samples", of: "cold"} },
			55, own + `; its own median: "` + coldFirstName + `" was measured in no run`},
		{"crun not measured in the cold run", []int{0, 60, 55}, measuredCold, 55,
			"run 3 of 3, the lower of the two middle runs (3 and 2) by its p50: 55.000, 60.000 ms; measured in 2 of 3 runs (not in run 1); " +
				"its own median, not run 1, the run of \"" + coldFirstName + "\", which did not measure it"},
	} {
		crun = tc.crun
		f := byName(t, mk(tc.cold), crunPeerName)
		if f.P50 != tc.want || f.Note != tc.note {
			t.Errorf("%s: p50 %v, note\n%q; want %v,\n%q", tc.name, f.P50, f.Note, tc.want, tc.note)
		}
	}
}

// TestNamesNotMeasured: rows whose names carried what was measured (the
// snapshot's layer, an entity type's precision and recall) are named
// alike in every run, so repeated runs give one row of them, and the
// measured part is in the note.
func TestNamesNotMeasured(t *testing.T) {
	a, b := captureFigure(1, 1305<<10, us(60000)), captureFigure(1, 1290<<10, us(61000))
	if a.Name != b.Name || a.Note != "layer 1305 KiB" {
		t.Errorf("snapshot rows %q (%q) and %q", a.Name, a.Note, b.Name)
	}
	e1 := entityFigure(entitycorpus.Score{Type: "PERSON", Labels: 82, Found: 78, TP: 75})
	e2 := entityFigure(entitycorpus.Score{Type: "PERSON", Labels: 82, Found: 80, TP: 76})
	if e1.Name != e2.Name || !strings.Contains(e1.Note, "78 found") {
		t.Errorf("entity rows %q (%q) and %q", e1.Name, e1.Note, e2.Name)
	}
	rep := Aggregate(runs([]float64{0.03, 0.03, 0.03}, func(i int) []Figure {
		f := captureFigure(1, int64(1300+i)<<10, us(60000+i))
		f.of = "snapshot"
		return []Figure{f}
	}))
	if got := names(rep); got != "floor,snapshot: capture and store, 1 MiB written" {
		t.Errorf("rows %s, want one snapshot row", got)
	}
}

// TestNoteAgainst: the E2B no-pool row's note names the cold GetOrCreate
// p50 of its own run and the bound it sets.
func TestNoteAgainst(t *testing.T) {
	rep := &Report{Figures: []Figure{{Name: coldCreateName, P50: 200}, {Name: "e2b", P50: 250, Note: "p50 of the create", against: coldCreateName, againstX: 1.3}}}
	rep.noteAgainst()
	want := `target: p50 < 1.3x the p50 of "` + coldCreateName + `" of its own run (200.0 ms): < 260.0 ms; p50 of the create`
	if rep.Figures[1].Note != want {
		t.Errorf("note\n%q, want\n%q", rep.Figures[1].Note, want)
	}
	if f := rep.Figures[1]; f.Target != "p50 < 260.0 ms (1.3x, the note)" || f.Met == nil || !*f.Met {
		t.Errorf("target %q, met %v: want the bound, met (250 < 260)", f.Target, f.Met)
	}
	for _, c := range []struct {
		p50, against float64
		met          string
	}{{270, 200, "false"}, {250, 0, "<nil>"}, {0, 200, "<nil>"}} {
		rep := &Report{Figures: []Figure{{Name: coldCreateName, P50: c.against}, {Name: "e2b", P50: c.p50, against: coldCreateName, againstX: 1.3}}}
		rep.noteAgainst()
		got := "<nil>"
		if m := rep.Figures[1].Met; m != nil {
			got = fmt.Sprint(*m)
		}
		if got != c.met || (got == "<nil>") != (rep.Figures[1].Target == "") {
			t.Errorf("p50 %v against %v: met %s, target %q; want met %s", c.p50, c.against, got, rep.Figures[1].Target, c.met)
		}
	}
}

// fakeCases are cases that need nothing but the host's python (the
// floor): after cancel is set, the third case's start sees the context
// ended on the call that sets it.
func fakeCases(cancelOn int, cancel context.CancelFunc) []Case {
	calls := 0
	return []Case{
		{Name: "one", Group: "g", Run: func(context.Context) ([]Figure, error) {
			return []Figure{{Name: "one", Value: 7, Unit: "things", Target: ">= 5", Met: boolp(true)}}, nil
		}},
		{Name: "two", Group: "g", Run: func(context.Context) ([]Figure, error) {
			if calls++; calls == cancelOn {
				cancel()
			}
			return []Figure{{Name: "two", Value: 3, Unit: "things"}}, nil
		}},
		{Name: "broken", Group: "g", Run: func(context.Context) ([]Figure, error) { return nil, errors.New("boom") }},
	}
}

// TestRepeatOneIsRun: Repeat with one run is Run's report (its JSON as
// Run's but for the times and what the floor measured), with no repeat
// fields; more runs name their count and floors in the JSON and the
// markdown's header.
func TestRepeatOneIsRun(t *testing.T) {
	testenv.RequireBinary(t, HostPython)
	ctx := context.Background()
	norm := func(rep *Report) map[string]any {
		b, _ := json.Marshal(rep)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"started", "loadStart", "loadEnd", "floorP50Ms"} {
			delete(m, k)
		}
		floor := m["figures"].([]any)[0].(map[string]any)
		for _, k := range []string{"p50Ms", "p95Ms", "p99Ms"} {
			delete(floor, k)
		}
		return m
	}
	r := Runner{Cases: fakeCases(0, nil)}
	one, err := r.Repeat(ctx, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	run, err := r.Run(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	if d := gocmp.Diff(norm(run), norm(one)); d != "" {
		t.Errorf("Repeat(1) against Run (-run +repeat):\n%s", d)
	}
	if b, _ := json.Marshal(one); bytes.Contains(b, []byte("repeat")) || bytes.Contains(b, []byte("runFloors")) || bytes.Contains(b, []byte("runsCompleted")) {
		t.Errorf("one run's JSON names the repeat: %s", b)
	}
	agg := Aggregate(runs([]float64{0.03, 0.04, 0.05}, func(int) []Figure { return nil }))
	b, _ := json.Marshal(agg)
	if !strings.Contains(string(b), `"repeat":3,"runsCompleted":3,"runFloorsP50Ms":[0.03,0.04,0.05]`) {
		t.Errorf("three runs' JSON: %s", b)
	}
	var md bytes.Buffer
	agg.Markdown(&md)
	if s := md.String(); !strings.Contains(s, "`sandlot bench --json --repeat 3`") || !strings.Contains(s, "p50 0.030, 0.040, 0.050 ms by run") ||
		!strings.Contains(s, "each case's rows come from its median run") {
		t.Errorf("markdown header:\n%s", s)
	}
	for _, n := range []int{0, -1, 2, 4} {
		if _, err := r.Repeat(ctx, 1, n); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("repeat %d: %v, want invalid", n, err)
		}
	}
}

// TestRepeatRunFails: a run that ends in an error ends the repetition;
// the error names the run, and the report keeps the count asked, says how
// many completed and holds the rows measured so far.
func TestRepeatRunFails(t *testing.T) {
	testenv.RequireBinary(t, HostPython)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := Runner{Cases: fakeCases(2, cancel)} // run 2 ends before its third case
	rep, err := r.Repeat(ctx, 20, 3)
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "run 2 of 3: ") {
		t.Fatalf("err %v, want run 2 of 3's cancel", err)
	}
	if rep == nil || rep.Repeat != 3 || rep.Completed != 1 || len(rep.RunFloorsP50) != 2 {
		t.Fatalf("report %+v, want 3 asked, 1 completed, two runs' floors", rep)
	}
	if got := names(rep); !strings.HasSuffix(got, "(1+1),one,two,broken") {
		t.Errorf("rows %s", got)
	}
	var tab bytes.Buffer
	rep.Table(&tab)
	if !strings.Contains(tab.String(), "repeat: 3 runs asked, 1 completed;") {
		t.Errorf("table header:\n%s", tab.String())
	}
}

// TestAggregateTailByP99: the 50 contexts' row has its goal on p99 and is
// its case's main figure, so the case's run is the median by p99, not by
// p50 (here the two pick different runs), and the density row beside it
// comes from that run.
func TestAggregateTailByP99(t *testing.T) {
	p50 := []float64{10, 12, 14}
	p99 := []float64{70, 40, 55} // median by p99: run 3 (55); by p50: run 2
	reps := runs([]float64{0.03, 0.03, 0.03}, func(i int) []Figure {
		tp := throughputFigure(50, nil, 0, time.Second)
		tp.N, tp.P50, tp.P95, tp.P99, tp.Value = 100, p50[i], p50[i]*2, p99[i], float64(1000*(i+1))
		tp = WithTarget(tp, tp.Target, tp.P99 < targetTailP99Ms)
		tp.of = "throughput"
		d := WithTarget(Figure{Name: "density", Value: float64(400 + i), Unit: "contexts"}, ">= 400", true)
		d.of = "throughput"
		return []Figure{tp, d}
	})
	out := Aggregate(reps)
	tp := byName(t, out, "throughput: python 1+1 on 50 contexts at once (latency)")
	if tp.P99 != 55 || tp.Target != "p99 < 50 ms" || tp.Met == nil || *tp.Met {
		t.Fatalf("50 contexts row: p99 %v, target %q, met %v; want run 3's 55 ms, p99 < 50 ms, missed", tp.P99, tp.Target, tp.Met)
	}
	if !strings.Contains(tp.Note, "p99") || !strings.Contains(tp.Note, "met in 1 of 3") {
		t.Errorf("note %q does not say p99 and met in 1 of 3", tp.Note)
	}
	if d := byName(t, out, "density"); d.Value != 402 {
		t.Errorf("density from run with value %v, want run 3's 402", d.Value)
	}
}

// TestThroughputTarget: only the 50 contexts' level carries the tail goal.
func TestThroughputTarget(t *testing.T) {
	if f := throughputFigure(10, []time.Duration{time.Millisecond}, 1, time.Second); f.Target != "" {
		t.Errorf("10 contexts carry a target %q", f.Target)
	}
	f := throughputFigure(50, []time.Duration{60 * time.Millisecond}, 1, time.Second)
	if f.Target != "p99 < 50 ms" || f.Met == nil || *f.Met {
		t.Errorf("50 contexts at p99 60 ms: target %q, met %v", f.Target, f.Met)
	}
}
