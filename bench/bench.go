// Package bench is the benchmark harness behind `sandlot bench`.
//
// Every latency is reported as p50/p95/p99 and as a ratio to the floor
// measured in the same run: a host python REPL doing `1+1` over a pipe. The
// harness measures and reports; it never asserts wall-clock times, because
// machines are noisy. Targets are printed beside the figures.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Figure is one measured line of the report.
type Figure struct {
	Name   string  `json:"name"`
	Group  string  `json:"group"`
	N      int     `json:"n,omitempty"`
	P50    float64 `json:"p50Ms,omitempty"` // milliseconds
	P95    float64 `json:"p95Ms,omitempty"`
	P99    float64 `json:"p99Ms,omitempty"`
	Ratio  float64 `json:"ratioToFloor,omitempty"` // p50 / floor p50
	Value  float64 `json:"value,omitempty"`        // non-latency figures
	Unit   string  `json:"unit,omitempty"`
	Target string  `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
	Note   string  `json:"note,omitempty"`
	// MaxRatio, when set, is a target on Ratio: the Runner fills Met once
	// the floor is known.
	MaxRatio float64 `json:"-"`
	// of is the case the figure came from (set by Runner.Run; "floor"
	// for the floor): a repeated run takes all of a case's rows from one
	// run (Aggregate). A figure without one is a case of its own.
	of string
	// follows names the figure whose case's run a repeated run takes this
	// figure's case from (crun's own run beside the cold create it is the
	// floor of), so the two read from the table compare within one run.
	follows string
	// against names a figure of the same run whose p50 times againstX is
	// this one's goal, stated in its note (Report.noteAgainst): the E2B
	// no-pool row against the cold GetOrCreate.
	against  string
	againstX float64
	// onP99 says the figure's target is on its p99 (a tail's goal): a
	// repeated run picks its case's median run by p99.
	onP99 bool
}

// Report is one run.
type Report struct {
	Started time.Time `json:"started"`
	Host    string    `json:"host"`
	// Machine names the CPU model, memory and kernel; LoadStart and
	// LoadEnd are the one-minute load average when the run began and
	// ended.
	Machine   string `json:"machine,omitempty"`
	LoadStart string `json:"loadStart,omitempty"`
	LoadEnd   string `json:"loadEnd,omitempty"`
	Runtime   string `json:"runtime,omitempty"`
	// Store is the kind of store the managers and daemons ran on (the
	// bench's --store; omitted: memory).
	Store    string  `json:"store,omitempty"`
	FloorP50 float64 `json:"floorP50Ms"`
	// Repeat is how many runs of the suite were asked for (Runner.Repeat;
	// omitted for one) and Completed how many ended without an error (a
	// last run cut short still gives the rows it measured); RunFloorsP50
	// is the floor's p50 in each run that measured it, in order: a row's
	// Ratio is to its own run's floor. FloorP50 is then the floor's median
	// run's.
	Repeat       int       `json:"repeat,omitempty"`
	Completed    int       `json:"runsCompleted,omitempty"`
	RunFloorsP50 []float64 `json:"runFloorsP50Ms,omitempty"`
	Figures      []Figure  `json:"figures"`
}

// Case measures one or more figures. It returns them, or an error that the
// report records as a note so one broken case does not hide the others.
type Case struct {
	Name  string
	Group string
	Run   func(ctx context.Context) ([]Figure, error)
}

// Runner runs cases in order. The floor runs first.
type Runner struct {
	Cases  []Case
	Logger *slog.Logger
	// Progress, when set, gets a line per case as it starts.
	Progress io.Writer
	// run prefixes the progress lines of one of Repeat's runs.
	run string
}

// Run measures the floor and every case.
func (r *Runner) Run(ctx context.Context, floorN int) (*Report, error) {
	rep := &Report{Started: time.Now().UTC(), Host: fmt.Sprintf("%s/%s, %d cores", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()),
		Machine: machine(), LoadStart: loadAverage()}
	defer func() { rep.LoadEnd = loadAverage() }()
	defer rep.noteAgainst()
	floor, err := PythonPipeFloor(ctx, floorN)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	floor.of = "floor"
	rep.FloorP50 = floor.P50
	rep.Figures = append(rep.Figures, floor)
	for _, c := range r.Cases {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		if r.Progress != nil {
			fmt.Fprintf(r.Progress, "bench: %s%s\n", r.run, c.Name)
		}
		figs, err := c.Run(ctx)
		if err != nil {
			rep.Figures = append(rep.Figures, Figure{Name: c.Name, Group: c.Group, Note: "not measured: " + err.Error(), of: c.Name})
			continue
		}
		for _, f := range figs {
			f.of = c.Name
			if f.Group == "" {
				f.Group = c.Group
			}
			f.toFloor(rep.FloorP50)
			rep.Figures = append(rep.Figures, f)
		}
	}
	return rep, nil
}

// noteAgainst ends the note of each figure read against another of the
// run with that figure's p50 in this run and the bound it sets, so the row
// reads true whatever run the other's row is shown from, and gives the
// figure that target and its verdict (none when the other was not
// measured, or this one has no samples).
func (rep *Report) noteAgainst() {
	for i := range rep.Figures {
		f := &rep.Figures[i]
		if f.against == "" {
			continue
		}
		var p50 float64
		for _, o := range rep.Figures {
			if o.Name == f.against {
				p50 = o.P50
			}
		}
		s := fmt.Sprintf("target: p50 < %gx the p50 of %q of its own run, which did not measure it", f.againstX, f.against)
		if p50 > 0 {
			s = fmt.Sprintf("target: p50 < %gx the p50 of %q of its own run (%.1f ms): < %.1f ms", f.againstX, f.against, p50, f.againstX*p50)
			if f.P50 > 0 {
				met := f.P50 < f.againstX*p50
				f.Target, f.Met = fmt.Sprintf("p50 < %.1f ms (%gx, the note)", f.againstX*p50, f.againstX), &met
			}
		}
		f.Note = joinNote(s, f.Note)
	}
}

// toFloor sets f's ratio to the floor's p50 and, where its target is on
// that ratio, its verdict.
func (f *Figure) toFloor(floorP50 float64) {
	if f.P50 > 0 && floorP50 > 0 {
		f.Ratio = round(f.P50/floorP50, 2)
		if f.MaxRatio > 0 {
			met := f.Ratio < f.MaxRatio
			f.Met = &met
		}
	}
}

// Latency turns samples into a figure.
func Latency(name string, samples []time.Duration) Figure {
	if len(samples) == 0 {
		return Figure{Name: name, Note: "no samples"}
	}
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		if i < 0 {
			i = 0
		}
		return round(float64(s[i])/float64(time.Millisecond), 4)
	}
	return Figure{Name: name, N: len(s), P50: pct(0.50), P95: pct(0.95), P99: pct(0.99)}
}

// Time runs fn n times (after warm warm-up runs) and returns the samples.
func Time(ctx context.Context, warm, n int, fn func(ctx context.Context) error) ([]time.Duration, error) {
	for i := 0; i < warm; i++ {
		if err := fn(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		t0 := time.Now()
		if err := fn(ctx); err != nil {
			return out, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// WithTarget marks f against a p50 (or value) target.
func WithTarget(f Figure, target string, met bool) Figure {
	f.Target = target
	f.Met = &met
	return f
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// Table writes the report as an aligned text table.
func (rep *Report) Table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "sandlot bench  %s  %s  runtime=%s  store=%s\n", rep.Started.Format(time.RFC3339), rep.Host, rep.Runtime, or(rep.Store, "memory"))
	fmt.Fprintf(tw, "machine: %s  load %s -> %s\n", or(rep.Machine, "?"), or(rep.LoadStart, "?"), or(rep.LoadEnd, "?"))
	if rep.Repeat > 1 {
		fmt.Fprintf(tw, "repeat: %s; each case's rows are from its median run by its main figure, or, where the note says so, "+
			"from the run of the row they are read against (the note says which run); x floor against the row's own run's floor (p50 by run: %s ms)\n",
			rep.runs(), joinNums(rep.RunFloorsP50, 3))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "group\tfigure\tn\tp50 ms\tp95 ms\tp99 ms\tx floor\tvalue\ttarget\tmet\tnote")
	for _, f := range rep.Figures {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Group, f.Name, num(float64(f.N), 0),
			num(f.P50, 3), num(f.P95, 3), num(f.P99, 3), num(f.Ratio, 2), value(f), f.Target, met(f.Met), f.Note)
	}
	tw.Flush()
}

// storeNote names a store other than memory for the markdown's first line.
func (rep *Report) storeNote() string {
	if rep.Store == "" || rep.Store == "memory" {
		return ""
	}
	return ", store " + rep.Store
}

// Markdown writes the report as the body of BENCHMARKS.md.
func (rep *Report) Markdown(w io.Writer) {
	if rep.Repeat > 1 {
		fmt.Fprintf(w, "# Benchmarks\n\nGenerated by `make benchmarks REPEAT=%d` (`sandlot bench --json --repeat %d`, then `sandlot bench --markdown BENCHMARKS.md`) on %s (%s, runtime %s%s). "+
			"The suite ran as %s, one whole run after another in one process (so run 1 is the coldest); each case's rows come from its median run "+
			"by the case's main figure (the statistic its goal is judged on), or, where the note says so, from the run of the row "+
			"they are read against, with that run's own figures, targets and verdicts; the notes say which run and why. "+
			"Latencies in milliseconds; \"x floor\" is p50 divided by the floor measured in the row's own run "+
			"(a host python REPL doing `1+1` over a pipe, p50 %s ms by run).\n\n",
			rep.Repeat, rep.Repeat, rep.Started.Format("2006-01-02"), rep.Host, rep.Runtime, rep.storeNote(), rep.runs(), joinNums(rep.RunFloorsP50, 3))
	} else {
		fmt.Fprintf(w, "# Benchmarks\n\nGenerated by `make benchmarks` (`sandlot bench --json`, then `sandlot bench --markdown BENCHMARKS.md`) on %s (%s, runtime %s%s). "+
			"Latencies in milliseconds; \"x floor\" is p50 divided by the floor measured in the same run "+
			"(a host python REPL doing `1+1` over a pipe, p50 %.3f ms).\n\n", rep.Started.Format("2006-01-02"), rep.Host, rep.Runtime, rep.storeNote(), rep.FloorP50)
	}
	if rep.Machine != "" || rep.LoadStart != "" {
		fmt.Fprintf(w, "Machine: %s; load average (one minute) %s when the run began, %s when it ended.\n\n",
			or(rep.Machine, "not read"), or(rep.LoadStart, "?"), or(rep.LoadEnd, "?"))
	}
	fmt.Fprintln(w, "| group | figure | n | p50 | p95 | p99 | x floor | value | target | met | note |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
	for _, f := range rep.Figures {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f.Group, f.Name, num(float64(f.N), 0),
			num(f.P50, 3), num(f.P95, 3), num(f.P99, 3), num(f.Ratio, 2), value(f), f.Target, met(f.Met),
			strings.ReplaceAll(f.Note, "|", "/"))
	}
}

// runs says how many runs a repeated report asked for and, when fewer,
// how many completed.
func (rep *Report) runs() string {
	if rep.Completed < rep.Repeat {
		return fmt.Sprintf("%d runs asked, %d completed", rep.Repeat, rep.Completed)
	}
	return fmt.Sprintf("%d runs", rep.Repeat)
}

func num(v float64, digits int) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%.*f", digits, v)
}

func value(f Figure) string {
	if f.Value == 0 && f.Unit == "" {
		return ""
	}
	return fmt.Sprintf("%.1f %s", f.Value, f.Unit)
}

func met(m *bool) string {
	if m == nil {
		return ""
	}
	if *m {
		return "yes"
	}
	return "NO"
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// ReadReport decodes a JSON report (the output of `sandlot bench --json`).
func ReadReport(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("read the JSON report: %w", err)
	}
	return &rep, nil
}
