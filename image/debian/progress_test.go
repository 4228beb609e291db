package debian

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTracker: mmdebstrap's verbose lines become steps, package totals
// (the essential set's from the download step, the rest's from apt's
// summary when they are installed), packages set up, the one at work and
// an estimate of what is left of the step from its pace.
func TestTracker(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := newTracker(func() time.Time { return now })
	feed := func(d time.Duration, lines ...string) {
		now = now.Add(d)
		for _, l := range lines {
			tr.line(l)
		}
	}
	type want struct {
		Step                      int
		Phase                     string
		Done, Total               int
		Package                   string
		Elapsed, StepElapsed, ETA time.Duration
	}
	got := func() want {
		p := tr.progress()
		return want{p.Step, p.Phase, p.Done, p.Total, p.Package, p.Elapsed, p.StepElapsed, p.ETA}
	}
	steps := []struct {
		name  string
		d     time.Duration
		lines []string
		want  want
	}{
		{"start", 0, nil, want{Step: 1, Phase: "updating package lists"}},
		{"update", time.Second, []string{"I: running apt-get update..."}, want{Step: 1, Phase: "updating package lists", Elapsed: time.Second}},
		{"download: the essential total", 2 * time.Second, []string{"I: downloading packages with apt...",
			"0 upgraded, 89 newly installed, 0 to remove and 0 not upgraded."},
			want{Step: 2, Phase: "downloading packages", Elapsed: 3 * time.Second}},
		{"extract counts nothing", time.Second, []string{"I: extracting archives..."}, want{Step: 3, Phase: "extracting packages", Elapsed: 4 * time.Second}},
		{"essential: unpacking", time.Second, []string{"I: installing essential packages...",
			"Unpacking base-files (12.4+deb12u15) ...", "Unpacking bash (5.2.15-2+b13) ..."},
			want{Step: 4, Phase: "installing essential packages", Total: 89, Package: "bash", Elapsed: 5 * time.Second}},
		{"essential: under 5% gives no estimate", 2 * time.Second, []string{"Setting up base-files (12.4+deb12u15) ..."},
			want{Step: 4, Phase: "installing essential packages", Done: 1, Total: 89, Package: "base-files", Elapsed: 7 * time.Second, StepElapsed: 2 * time.Second}},
		{"the rest: apt's total, reset counts", 3 * time.Second, []string{"I: installing remaining packages inside the chroot...",
			"0 upgraded, 10 newly installed, 0 to remove and 0 not upgraded.",
			"Unpacking python3-numpy:amd64 (1:1.24.2-1) ...", "Unpacking python3-sympy (1.11.1-1) ..."},
			want{Step: 5, Phase: "installing packages", Total: 10, Package: "python3-sympy", Elapsed: 10 * time.Second}},
		{"the rest: pace gives an estimate", 4 * time.Second, []string{"Setting up python3-numpy:amd64 (1:1.24.2-1) ..."},
			// 3 of 20 halves done in 4 s: 17 more take about 23 s.
			want{Step: 5, Phase: "installing packages", Done: 1, Total: 10, Package: "python3-numpy", Elapsed: 14 * time.Second,
				StepElapsed: 4 * time.Second, ETA: 23 * time.Second}},
		{"the customize hooks: byte-compiling", time.Second, []string{"I: running --customize-hook in shell: sh -c 'set -e",
			"I: running --customize-hook in shell: sh -c 'set -e"},
			want{Step: 6, Phase: "compiling python, adding the user", Elapsed: 15 * time.Second}},
		{"a step that counts none", time.Second, []string{"I: cleaning package lists and apt cache...", "I: creating tarball..."},
			want{Step: 8, Phase: "packing the root file system", Elapsed: 16 * time.Second}},
	}
	for _, st := range steps {
		feed(st.d, st.lines...)
		if d := cmp.Diff(st.want, got()); d != "" {
			t.Errorf("%s: (-want +got)\n%s", st.name, d)
		}
	}
	if tr.line("W: some warning") {
		t.Error("an unknown line changed the progress")
	}
}

// TestNewlyInstalled reads apt's summary and nothing else.
func TestNewlyInstalled(t *testing.T) {
	for _, tc := range []struct {
		line string
		n    int
		ok   bool
	}{
		{"0 upgraded, 240 newly installed, 0 to remove and 0 not upgraded.", 240, true},
		{"Get:1 http://deb.debian.org/debian bookworm/main amd64 gcc-12-base", 0, false},
		{"0 upgraded, many newly installed", 0, false},
	} {
		n, ok := newlyInstalled(tc.line)
		if n != tc.n || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.line, n, ok, tc.n, tc.ok)
		}
	}
}
