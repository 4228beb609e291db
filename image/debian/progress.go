package debian

import (
	"strconv"
	"strings"
	"time"
)

// Progress reports a build: Step of Steps (for a bar) and what it does,
// and inside the steps that install packages, how many are done.
type Progress struct {
	Step, Steps int
	Phase       string
	// Done of Total packages of this step are set up (Total 0: the step
	// counts none). Package is the one being unpacked or set up now, the
	// step's last word: a maintainer script can run for a minute without
	// a line (python3-sympy's byte-compiling).
	Done, Total int
	Package     string
	// Elapsed is the time since the build started; StepElapsed since this
	// step started.
	Elapsed, StepElapsed time.Duration
	// ETA estimates what is left of this step from its pace (packages
	// unpacked and set up so far); 0 when there is no estimate yet.
	ETA time.Duration
}

// phases are mmdebstrap's info lines, in order, and then the store's work.
var phases = [...]struct{ prefix, phase string }{
	{"I: running apt-get update", "updating package lists"},
	{"I: downloading packages", "downloading packages"},
	{"I: extracting archives", "extracting packages"},
	{"I: installing essential packages", "installing essential packages"},
	{"I: installing remaining packages", "installing packages"},
	// The customize hooks: python's byte code (deferCompile), the user.
	{"I: running --customize-hook", "compiling python, adding the user"},
	{"I: cleaning package lists", "cleaning up"},
	{"I: creating tarball", "packing the root file system"},
	{"", "storing the image"},
	{"", "done"},
}

// Phase indexes of the steps the build reports itself.
const (
	phaseStore = len(phases) - 2
	phaseDone  = len(phases) - 1
)

// tracker turns mmdebstrap's verbose output into Progress: its "I:"
// lines are the steps; apt's "N newly installed" line gives a step's
// package total (the essential set's in the download step, the rest's
// when they are installed), and dpkg's "Unpacking P" and "Setting up P"
// lines count them. It is not safe for concurrent use.
type tracker struct {
	start     time.Time
	now       func() time.Time
	phase     int // index into phases; -1 before the first
	stepStart time.Time
	total     int // the last "newly installed" count
	essential int // the essential set's count (from the download step)
	unpacked  int
	setUp     int
	pkg       string
}

func newTracker(now func() time.Time) *tracker {
	t := now()
	return &tracker{start: t, now: now, phase: -1, stepStart: t}
}

// line reads one line of mmdebstrap's stderr and reports whether the
// progress changed.
func (t *tracker) line(line string) bool {
	if strings.HasPrefix(line, "I: ") {
		for i := t.phase + 1; i < len(phases); i++ {
			if phases[i].prefix != "" && strings.HasPrefix(line, phases[i].prefix) {
				t.enter(i)
				return true
			}
		}
		return false
	}
	if n, ok := newlyInstalled(line); ok {
		t.total = n
		if phases[max(t.phase, 0)].phase == "downloading packages" {
			t.essential = n
		}
		return true
	}
	if p, ok := strings.CutPrefix(line, "Unpacking "); ok {
		t.unpacked++
		t.pkg = packageName(p)
		return true
	}
	if p, ok := strings.CutPrefix(line, "Setting up "); ok {
		t.setUp++
		t.pkg = packageName(p)
		return true
	}
	return false
}

// enter starts step i: its counts begin again; the essential
// installation counts the essential set found when it was downloaded.
func (t *tracker) enter(i int) {
	t.phase, t.stepStart = i, t.now()
	t.unpacked, t.setUp, t.pkg = 0, 0, ""
	switch phases[i].phase {
	case "installing essential packages":
		t.total = t.essential
	case "installing packages":
		t.total = 0 // apt says how many when it starts
	}
}

// progress is the current report.
func (t *tracker) progress() Progress {
	i := max(t.phase, 0)
	now := t.now()
	p := Progress{Step: i + 1, Steps: len(phases), Phase: phases[i].phase,
		Elapsed: now.Sub(t.start), StepElapsed: now.Sub(t.stepStart)}
	if t.counting() && t.total > 0 {
		p.Done, p.Total, p.Package = min(t.setUp, t.total), t.total, t.pkg
		// Each package is unpacked and then set up: two halves of its
		// work, the second usually the longer (maintainer scripts).
		done := float64(min(t.unpacked, t.total)+min(t.setUp, t.total)) / float64(2*t.total)
		if done >= 0.05 && done < 1 {
			p.ETA = time.Duration(float64(p.StepElapsed) * (1 - done) / done).Round(time.Second)
		}
	}
	return p
}

// counting reports whether the current step installs packages.
func (t *tracker) counting() bool {
	if t.phase < 0 {
		return false
	}
	switch phases[t.phase].phase {
	case "installing essential packages", "installing packages":
		return true
	}
	return false
}

// newlyInstalled reads apt's summary, "0 upgraded, 240 newly installed,
// 0 to remove and 0 not upgraded.".
func newlyInstalled(line string) (int, bool) {
	_, rest, ok := strings.Cut(line, " upgraded, ")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, " newly installed")
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(n)
	return v, err == nil
}

// packageName is the package of dpkg's "python3-numpy:amd64 (1:1.24.2-1)
// ..." without its architecture and version.
func packageName(s string) string {
	name, _, _ := strings.Cut(s, " ")
	name, _, _ = strings.Cut(name, ":")
	return name
}
