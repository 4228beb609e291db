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
	// judgedBy names the statistic a repeated run (Runner.Repeat) picks
	// the figure's median run by where it is neither P50 nor Value (the
	// warm python row's ratio to the floor taken in turn); judged is its
	// value, in judgedUnit. Set with judgeBy.
	judgedBy, judgedUnit string
	judged               float64
	// follows names the figure whose run a repeated run takes this one
	// from (crun's own run beside the cold create it is the floor of), so
	// the two read from the table compare within one run.
	follows string
}

// Report is one run.
type Report struct {
	Started time.Time `json:"started"`
	Host    string    `json:"host"`
	// Machine names the CPU model, memory and kernel; LoadStart and
	// LoadEnd are the one-minute load average when the run began and
	// ended.
	Machine   string  `json:"machine,omitempty"`
	LoadStart string  `json:"loadStart,omitempty"`
	LoadEnd   string  `json:"loadEnd,omitempty"`
	Runtime   string  `json:"runtime,omitempty"`
	FloorP50  float64 `json:"floorP50Ms"`
	// Repeat is how many runs of the suite the report picks its rows
	// from (Runner.Repeat; omitted for one), and RunFloorsP50 the floor's
	// p50 in each, in order: a row's Ratio is to its own run's floor.
	// FloorP50 is then the median run's.
	Repeat       int       `json:"repeat,omitempty"`
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
	floor, err := PythonPipeFloor(ctx, floorN)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
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
			rep.Figures = append(rep.Figures, Figure{Name: c.Name, Group: c.Group, Note: "not measured: " + err.Error()})
			continue
		}
		for _, f := range figs {
			if f.Group == "" {
				f.Group = c.Group
			}
			f.toFloor(rep.FloorP50)
			rep.Figures = append(rep.Figures, f)
		}
	}
	return rep, nil
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
	fmt.Fprintf(tw, "sandlot bench  %s  %s  runtime=%s\n", rep.Started.Format(time.RFC3339), rep.Host, rep.Runtime)
	fmt.Fprintf(tw, "machine: %s  load %s -> %s\n", or(rep.Machine, "?"), or(rep.LoadStart, "?"), or(rep.LoadEnd, "?"))
	if rep.Repeat > 1 {
		fmt.Fprintf(tw, "repeat: %d runs; each row is its median run's (the note says which), x floor against that run's floor (p50 by run: %s ms)\n",
			rep.Repeat, joinNums(rep.RunFloorsP50, 3))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "group\tfigure\tn\tp50 ms\tp95 ms\tp99 ms\tx floor\tvalue\ttarget\tmet\tnote")
	for _, f := range rep.Figures {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Group, f.Name, num(float64(f.N), 0),
			num(f.P50, 3), num(f.P95, 3), num(f.P99, 3), num(f.Ratio, 2), value(f), f.Target, met(f.Met), f.Note)
	}
	tw.Flush()
}

// Markdown writes the report as the body of BENCHMARKS.md.
func (rep *Report) Markdown(w io.Writer) {
	if rep.Repeat > 1 {
		fmt.Fprintf(w, "# Benchmarks\n\nGenerated by `make benchmarks REPEAT=%d` (`sandlot bench --json --repeat %d`, then `sandlot bench --markdown BENCHMARKS.md`) on %s (%s, runtime %s). "+
			"The suite ran %d times, one whole run after another; each row is the row of its median run by the statistic its note names "+
			"(for an even count the lower of the two middle runs), with that run's own figures, target and verdict. "+
			"Latencies in milliseconds; \"x floor\" is p50 divided by the floor measured in the row's own run "+
			"(a host python REPL doing `1+1` over a pipe, p50 %s ms by run).\n\n",
			rep.Repeat, rep.Repeat, rep.Started.Format("2006-01-02"), rep.Host, rep.Runtime, rep.Repeat, joinNums(rep.RunFloorsP50, 3))
	} else {
		fmt.Fprintf(w, "# Benchmarks\n\nGenerated by `make benchmarks` (`sandlot bench --json`, then `sandlot bench --markdown BENCHMARKS.md`) on %s (%s, runtime %s). "+
			"Latencies in milliseconds; \"x floor\" is p50 divided by the floor measured in the same run "+
			"(a host python REPL doing `1+1` over a pipe, p50 %.3f ms).\n\n", rep.Started.Format("2006-01-02"), rep.Host, rep.Runtime, rep.FloorP50)
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
