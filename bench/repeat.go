package bench

// Repeated runs: one run of the suite moves ±10% on a 2-core VM, more on
// tails, so a row near its goal flips between met and missed from one run
// to the next. Runner.Repeat runs the whole suite n times and reports, per
// figure, the row of its median run.
//
// Whole runs one after another (floor, every case; floor, every case...)
// rather than each case n times in a row: a row and what it is read against
// (its run's floor, crun's own run beside the cold create) are then measured
// as close together as in a single run, each run is what `sandlot bench`
// measures without --repeat, and a burst of other work on the machine
// lands in one run of a case rather than in all of them, where the median
// sets it aside.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// Repeat measures the floor and every case n times, whole runs in turn, and
// reports one row per figure: the row of its median run (Aggregate). One
// run is Run's report as it is. A run that ends in an error ends the
// repetition: the report holds the runs so far, and the error is returned.
func (r *Runner) Repeat(ctx context.Context, floorN, n int) (*Report, error) {
	if n < 1 {
		return nil, fmt.Errorf("repeat %d times: want 1 or more: %w", n, errdefs.ErrInvalidArgument)
	}
	if n == 1 {
		return r.Run(ctx, floorN)
	}
	var reps []*Report
	var err error
	for i := 1; i <= n && err == nil; i++ {
		one := *r
		one.run = fmt.Sprintf("run %d of %d: ", i, n)
		var rep *Report
		if rep, err = one.Run(ctx, floorN); rep != nil {
			reps = append(reps, rep)
		}
	}
	if len(reps) == 0 {
		return nil, err
	}
	return Aggregate(reps), err
}

// Aggregate makes one report of several runs of the same suite: one row per
// figure (by name, and by occurrence where a run repeats a name), in the
// runs' order, each the row of the run whose judged statistic (judgedStat)
// is the median of those that measured it, or the lower of the two middle
// ones for an even count. The row keeps that run's figures, target and
// verdict; its note says how it was chosen, the statistic in every run,
// how many runs met the target and the runs that lack the figure. A figure
// that follows another is taken from that one's run where it has a row
// there. One report is returned as it is.
func Aggregate(reps []*Report) *Report {
	if len(reps) == 1 {
		return reps[0]
	}
	first, last := reps[0], reps[len(reps)-1]
	out := &Report{Started: first.Started, Host: first.Host, Machine: first.Machine, LoadStart: first.LoadStart,
		LoadEnd: last.LoadEnd, Runtime: first.Runtime, Repeat: len(reps)}
	for _, rep := range reps {
		out.RunFloorsP50 = append(out.RunFloorsP50, rep.FloorP50)
	}
	slots := collate(reps)
	picked := make([]Figure, len(slots))
	runOf := map[string]int{} // a figure's name to the run its row came from
	for pass := 0; pass < 2; pass++ {
		for i, s := range slots {
			if follower := s.follows() != ""; follower != (pass == 1) {
				continue
			}
			lead, ok := runOf[s.follows()]
			if ok && s.rows[lead] == nil {
				ok = false
			}
			run, f := pick(s.rows, lead, ok)
			if ok {
				f.Note = joinNote(fmt.Sprintf("run %d's, the run of %q, which it is read beside", lead+1, s.follows()), f.Note)
			}
			picked[i] = f
			if _, dup := runOf[f.Name]; !dup && run >= 0 {
				runOf[f.Name] = run
			}
			if i == 0 && run >= 0 { // the floor: every run's first row
				out.FloorP50 = reps[run].FloorP50
			}
		}
	}
	out.Figures = picked
	return out
}

// slot is one figure across the runs: its row in each (nil where a run has
// none).
type slot struct{ rows []*Figure }

func (s slot) follows() string {
	for _, f := range s.rows {
		if f != nil {
			return f.follows
		}
	}
	return ""
}

// collate lines up the runs' rows by name and occurrence, in the first
// run's order; a row a later run adds goes after the row that precedes it
// there.
func collate(reps []*Report) []slot {
	var slots []slot
	var keys []string
	for ri, rep := range reps {
		seen := map[string]int{}
		prev := -1
		for fi := range rep.Figures {
			f := &rep.Figures[fi]
			key := f.Name + "\x00" + strconv.Itoa(seen[f.Name])
			seen[f.Name]++
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

// pick returns the run (-1: none measured) and the row of rows to report,
// its note saying why: run lead's when lead is set, else the median run's.
func pick(rows []*Figure, lead int, useLead bool) (int, Figure) {
	var present, measured []int
	for i, f := range rows {
		if f == nil {
			continue
		}
		present = append(present, i)
		if _, _, _, ok := f.judgedStat(); ok {
			measured = append(measured, i)
		}
	}
	var parts []string
	if len(present) < len(rows) {
		parts = append(parts, fmt.Sprintf("in %d of %d runs (none in %s)", len(present), len(rows), runList(missing(rows))))
	}
	if len(measured) == 0 {
		f := *rows[present[0]]
		parts = append(parts, fmt.Sprintf("run %d's, nothing measured to pick by", present[0]+1))
		f.Note = joinNote(strings.Join(parts, "; "), f.Note)
		return -1, f
	}
	// By the statistic, then by run: the order the note lists them in.
	slices.SortStableFunc(measured, func(a, b int) int {
		_, va, _, _ := rows[a].judgedStat()
		_, vb, _, _ := rows[b].judgedStat()
		switch {
		case va < vb:
			return -1
		case va > vb:
			return 1
		}
		return 0
	})
	run := measured[(len(measured)-1)/2]
	how := "median"
	if len(measured)%2 == 0 {
		how = "lower median"
	}
	if useLead {
		run, how = lead, "spread"
	}
	by, _, unit, _ := rows[run].judgedStat()
	vals := make([]float64, len(measured))
	for i, r := range measured {
		_, vals[i], _, _ = rows[r].judgedStat()
	}
	if useLead {
		parts = append(parts, fmt.Sprintf("%s of %d runs by %s: %s", how, len(measured), by, formatStats(vals, unit)))
	} else {
		parts = append(parts, fmt.Sprintf("%s of %d runs by %s, run %d's: %s", how, len(measured), by, run+1, formatStats(vals, unit)))
	}
	met, judged := 0, 0
	for _, i := range present {
		if m := rows[i].Met; m != nil {
			judged++
			if *m {
				met++
			}
		}
	}
	if judged > 0 {
		parts = append(parts, fmt.Sprintf("met in %d of %d", met, judged))
	}
	f := *rows[run]
	f.Note = joinNote(strings.Join(parts, "; "), f.Note)
	return run, f
}

// judgedStat is the statistic a repeated run picks f's median run by: the
// one its goal is judged on (judgeBy), else its ratio to the floor where
// its target is one (MaxRatio), else p50 for a latency, else Value. ok is
// false for a row with no figure (a case that was not measured).
func (f Figure) judgedStat() (by string, v float64, unit string, ok bool) {
	switch {
	case f.judgedBy != "":
		return f.judgedBy, f.judged, f.judgedUnit, true
	case f.MaxRatio > 0 && f.Ratio > 0:
		return "x floor", f.Ratio, "x", true
	case f.P50 > 0:
		return "p50", f.P50, "ms", true
	case f.Value != 0 || f.Unit != "":
		return "value", f.Value, f.Unit, true
	}
	return "", 0, "", false
}

// judgeBy makes v, named by and in unit ("ms", "x" or a value's unit), the
// statistic a repeated run picks f's median run by.
func (f *Figure) judgeBy(by string, v float64, unit string) {
	f.judgedBy, f.judged, f.judgedUnit = by, v, unit
}

func formatStats(vals []float64, unit string) string {
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

func missing(rows []*Figure) []int {
	var out []int
	for i, f := range rows {
		if f == nil {
			out = append(out, i)
		}
	}
	return out
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
	if theirs == "" {
		return ours
	}
	return ours + "; " + theirs
}
