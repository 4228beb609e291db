package bench

// Repeated runs: one run of the suite moves ±10% on a 2-core VM, more on
// tails, so a row near its goal flips between met and missed from one run
// to the next. Runner.Repeat runs the whole suite n times and reports, per
// case, the rows of its median run.
//
// Whole runs one after another (floor, every case; floor, every case...)
// rather than each case n times in a row: a row and what it is read against
// (its run's floor, crun's own run beside the cold create) are then measured
// as close together as in a single run, each run is what `sandlot bench`
// measures without --repeat, and a burst of other work on the machine
// lands in one run of a case rather than in all of them, where the median
// sets it aside.
//
// The unit of choice is the case, not the row: the rows of one case are
// read against each other (the cold GetOrCreate, first result and first
// call; the desktop's phases; with and without a volume), so they must come
// from one run.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// Repeat measures the floor and every case n times, whole runs in turn, and
// reports each case's rows from its median run (Aggregate). n is odd, so
// that a median run exists; one run is Run's report as it is. A run that
// ends in an error ends the repetition: the report holds the runs so far
// (Repeat says n, Completed how many ended cleanly), and the error, which
// names the run, is returned.
func (r *Runner) Repeat(ctx context.Context, floorN, n int) (*Report, error) {
	if err := CheckRepeat(n); err != nil {
		return nil, err
	}
	if n == 1 {
		return r.Run(ctx, floorN)
	}
	var reps []*Report
	var err error
	completed := 0
	for i := 1; i <= n; i++ {
		one := *r
		one.run = fmt.Sprintf("run %d of %d: ", i, n)
		rep, rerr := one.Run(ctx, floorN)
		if rep != nil {
			reps = append(reps, rep)
		}
		if rerr != nil {
			err = fmt.Errorf("run %d of %d: %w", i, n, rerr)
			break
		}
		completed++
	}
	if len(reps) == 0 {
		return nil, err
	}
	out := aggregate(reps)
	out.Repeat, out.Completed = n, completed
	return out, err
}

// CheckRepeat says whether n runs can be repeated: an odd count, 1 or
// more, so that the median run is one of them.
func CheckRepeat(n int) error {
	if n < 1 || n%2 == 0 {
		return fmt.Errorf("repeat %d times: want an odd count of runs, 1 or more (the median run is one of them): %w", n, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Aggregate makes one report of several runs of the same suite. For each
// case it chooses one run, the median by the case's main figure (its
// first with a target, else its first), and takes all the case's rows from
// that run, in the runs' order, each with that run's figures, target and
// verdict; a case whose figures follow another's (crun's peer, the cold
// create) takes that case's run where it measured there. The notes say how
// the run was chosen. One report is returned as it is.
func Aggregate(reps []*Report) *Report {
	if len(reps) == 1 {
		return reps[0]
	}
	out := aggregate(reps)
	out.Repeat, out.Completed = len(reps), len(reps)
	return out
}

func aggregate(reps []*Report) *Report {
	first, last := reps[0], reps[len(reps)-1]
	out := &Report{Started: first.Started, Host: first.Host, Machine: first.Machine, LoadStart: first.LoadStart,
		LoadEnd: last.LoadEnd, Runtime: first.Runtime, Store: first.Store}
	for _, rep := range reps {
		out.RunFloorsP50 = append(out.RunFloorsP50, rep.FloorP50)
	}
	slots := collate(reps)
	groups := groupCases(slots)
	runOf := map[string]int{} // a case to its chosen run (-1: none measured)
	caseOf := map[string]string{}
	for _, s := range slots {
		caseOf[s.name()] = s.of()
	}
	rows := make([]*Figure, len(slots))
	for pass := 0; pass < 2; pass++ {
		for _, g := range groups {
			if (g.follows != "") != (pass == 1) {
				continue
			}
			lead, ok := runOf[caseOf[g.follows]]
			if !ok {
				lead = -2 // not in the report
			}
			run := g.take(slots, rows, lead)
			runOf[g.name] = run
			if g.name == "floor" && run >= 0 {
				out.FloorP50 = reps[run].FloorP50
			}
		}
	}
	for _, f := range rows {
		if f != nil {
			out.Figures = append(out.Figures, *f)
		}
	}
	return out
}

// slot is one figure across the runs: its row in each (nil where a run has
// none).
type slot struct{ rows []*Figure }

func (s slot) any() *Figure {
	for _, f := range s.rows {
		if f != nil {
			return f
		}
	}
	return nil
}

func (s slot) name() string { return s.any().Name }

// of is the slot's case: a row without one is a case of its own.
func (s slot) of() string { return or(s.any().of, "\x00"+s.any().Name) }

// collate lines up the runs' rows by case, name and occurrence, in the
// first run's order; a row a later run adds goes after the row that
// precedes it there.
func collate(reps []*Report) []slot {
	var slots []slot
	var keys []string
	for ri, rep := range reps {
		seen := map[string]int{}
		prev := -1
		for fi := range rep.Figures {
			f := &rep.Figures[fi]
			id := f.of + "\x00" + f.Name
			key := id + "\x00" + strconv.Itoa(seen[id])
			seen[id]++
			at := slices.Index(keys, key)
			if at < 0 {
				at = prev + 1
				keys = slices.Insert(keys, at, key)
				slots = slices.Insert(slots, at, slot{rows: make([]*Figure, len(reps))})
			}
			slots[at].rows[ri] = f
			prev = at
		}
	}
	return slots
}

// group is one case: its slots in order, and the figure whose case's run
// it follows.
type group struct {
	name    string
	slots   []int
	follows string
}

func groupCases(slots []slot) []*group {
	var out []*group
	by := map[string]*group{}
	for i, s := range slots {
		g := by[s.of()]
		if g == nil {
			g = &group{name: s.of()}
			by[g.name] = g
			out = append(out, g)
		}
		g.slots = append(g.slots, i)
		if f := s.any().follows; f != "" {
			g.follows = f
		}
	}
	return out
}

// main is the slot of g's main figure: its first with a target in any
// run, else its first measured, else its first.
func (g *group) main(slots []slot) int {
	for _, want := range []func(*Figure) bool{
		func(f *Figure) bool { return f.Target != "" },
		func(f *Figure) bool { _, _, _, ok := f.stat(); return ok },
	} {
		for _, i := range g.slots {
			if slices.ContainsFunc(slots[i].rows, func(f *Figure) bool { return f != nil && want(f) }) {
				return i
			}
		}
	}
	return g.slots[0]
}

// take sets rows[i] for each of g's slots to its row in g's chosen run,
// with its note, and returns the run: lead's (the run of the case g
// follows; -1 measured nothing, -2 absent) where g's main figure was
// measured there, else the median by g's main figure.
func (g *group) take(slots []slot, rows []*Figure, lead int) int {
	mi := g.main(slots)
	main := slots[mi].rows
	n := len(main)
	run, note := median(main)
	if g.follows != "" {
		followed := fmt.Sprintf("%q", g.follows)
		switch {
		case lead >= 0 && measuredIn(main, lead):
			run = lead
			note = fmt.Sprintf("run %d of %d, the run of %s, which it is read beside; %s", lead+1, n, followed, spread(main))
		case lead >= 0:
			note += fmt.Sprintf("; its own median, not run %d, the run of %s, which did not measure it", lead+1, followed)
		case lead == -1:
			note += fmt.Sprintf("; its own median: %s was measured in no run", followed)
		default:
			note += fmt.Sprintf("; its own median: %s is not in this report", followed)
		}
	}
	at := run
	if at < 0 { // nothing measured: the first run the case is in
		at = slices.IndexFunc(main, func(f *Figure) bool { return f != nil })
	}
	for _, i := range g.slots {
		f := slots[i].rows[at]
		if f == nil {
			continue // not in this run: the case's rows are this run's
		}
		c := *f
		own := fmt.Sprintf("from run %d, the run of %q", at+1, slots[mi].name())
		if i == mi {
			own = note
		}
		c.Note = joinNote(joinNote(own, metCount(slots[i].rows)), c.Note)
		rows[i] = &c
	}
	return run
}

// median returns the run whose row is the median of rows by its statistic
// (-1: none measured) and a note saying so. Of an even count (a run cut
// short, or a case missing from a run) it takes, of the two middle runs,
// the one that missed its goal where they disagree, else the lower.
func median(rows []*Figure) (int, string) {
	m := measured(rows)
	n := len(rows)
	if len(m) == 0 {
		return -1, fmt.Sprintf("not measured in any of %d runs", n)
	}
	run := m[(len(m)-1)/2]
	how := "the median"
	if len(m)%2 == 0 {
		lo, hi := m[len(m)/2-1], m[len(m)/2]
		how = fmt.Sprintf("the lower of the two middle runs (%d and %d)", lo+1, hi+1)
		if a, b := rows[lo].Met, rows[hi].Met; a != nil && b != nil && *a != *b {
			how = fmt.Sprintf("of the two middle runs (%d and %d) the one that missed its goal", lo+1, hi+1)
			if *a {
				run = hi
			}
		}
	}
	by, _, _, _ := rows[run].stat()
	note := fmt.Sprintf("run %d of %d, %s by its %s: %s", run+1, n, how, by, values(rows, m))
	if len(m) < n {
		note += fmt.Sprintf("; measured in %d of %d runs (not in %s)", len(m), n, runList(unmeasured(rows)))
	}
	return run, note
}

// spread is the statistic of rows in every run that measured it.
func spread(rows []*Figure) string {
	m := measured(rows)
	by, _, _, _ := rows[m[0]].stat()
	return fmt.Sprintf("its own %s by run, low to high: %s", by, values(rows, m))
}

// measured is the runs whose row has a statistic, by it and then by run.
func measured(rows []*Figure) []int {
	var m []int
	for i := range rows {
		if measuredIn(rows, i) {
			m = append(m, i)
		}
	}
	slices.SortStableFunc(m, func(a, b int) int {
		_, va, _, _ := rows[a].stat()
		_, vb, _, _ := rows[b].stat()
		switch {
		case va < vb:
			return -1
		case va > vb:
			return 1
		}
		return 0
	})
	return m
}

func measuredIn(rows []*Figure, run int) bool {
	if rows[run] == nil {
		return false
	}
	_, _, _, ok := rows[run].stat()
	return ok
}

func unmeasured(rows []*Figure) []int {
	var out []int
	for i := range rows {
		if !measuredIn(rows, i) {
			out = append(out, i)
		}
	}
	return out
}

// metCount says in how many runs a row with a goal met it.
func metCount(rows []*Figure) string {
	met, judged := 0, 0
	for _, f := range rows {
		if f != nil && f.Met != nil {
			judged++
			if *f.Met {
				met++
			}
		}
	}
	if judged == 0 {
		return ""
	}
	return fmt.Sprintf("met in %d of %d", met, judged)
}

// stat is the statistic a repeated run picks a case's median run by, from
// its main figure: the one its verdict is computed on. That is its ratio
// to its run's floor where its target is one (MaxRatio), p99 where its
// target is on p99 (onP99), else p50 for a latency, else Value. ok is
// false for a row with no figure (a case that was not measured).
func (f Figure) stat() (by string, v float64, unit string, ok bool) {
	switch {
	case f.MaxRatio > 0 && f.Ratio > 0:
		return "ratio to its run's floor", f.Ratio, "x", true
	case f.onP99 && f.P99 > 0:
		return "p99", f.P99, "ms", true
	case f.P50 > 0:
		return "p50", f.P50, "ms", true
	case f.Value != 0 || f.Unit != "":
		return "value", f.Value, f.Unit, true
	}
	return "", 0, "", false
}

func values(rows []*Figure, runs []int) string {
	vals := make([]float64, len(runs))
	var unit string
	for i, r := range runs {
		_, vals[i], unit, _ = rows[r].stat()
	}
	switch unit {
	case "x":
		s := make([]string, len(vals))
		for i, v := range vals {
			s[i] = strconv.FormatFloat(v, 'f', 2, 64) + "x"
		}
		return strings.Join(s, ", ")
	case "ms":
		return joinNums(vals, 3) + " ms"
	}
	return strings.TrimSpace(joinNums(vals, 1) + " " + unit)
}

func joinNums(vals []float64, digits int) string {
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i] = strconv.FormatFloat(v, 'f', digits, 64)
	}
	return strings.Join(s, ", ")
}

// runList names runs by their number: "run 3", "runs 2 and 3", "runs 1,
// 2 and 4".
func runList(runs []int) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = strconv.Itoa(r + 1)
	}
	if len(s) == 1 {
		return "run " + s[0]
	}
	return "runs " + strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

func joinNote(ours, theirs string) string {
	switch {
	case theirs == "":
		return ours
	case ours == "":
		return theirs
	}
	return ours + "; " + theirs
}
