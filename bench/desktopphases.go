package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
)

// phaseNames says what each of the desktop timeline's phases is.
var phaseNames = map[string]string{
	"start:sandbox":       "sandbox started (its first process)",
	"start:Xvfb":          "Xvfb started",
	"x":                   "X answers (xdpyinfo)",
	"start:dbus-daemon":   "D-Bus session bus started",
	"start:xfce4-session": "xfce4-session started",
	"start:xfwm4":         "window manager started (xfwm4)",
	"wm":                  "window manager seen by the readiness wait",
	"start:xfsettingsd":   "xfsettingsd started",
	"start:xfce4-panel":   "panel started",
	"start:Thunar":        "Thunar daemon started",
	"start:xfdesktop":     "xfdesktop started",
	"start:x11vnc":        "x11vnc started",
	"start:websockify":    "websockify (noVNC) started",
	"stream":              "stream answers (noVNC page)",
	"start:chromium":      "browser started",
	"browser":             "browser answers (DevTools)",
	"host:sandbox":        "sandbox handed to the desktop manager (taken, or created and warmed)",
	"host:ready":          "desktop ready (the manager's readiness wait returned)",
	"host:answered":       "first call's own work done (scrot, the PNG read back)",
	"warm:wm":             "its warm-up: window manager seen, from the sandbox's start",
	"warm:drawn":          "its warm-up: drawn, from the window manager seen",
}

// desktopPhases adds to phases, for the session of id created at t0,
// when each part of its desktop started and answered (from t0), and when
// its browser answers (polled after the screenshot, at most 60 s).
// undrawn says a warm desktop's warm-up ran out of its wait for the
// drawing before the take (its take then looked again).
func desktopPhases(ctx context.Context, dm *desktop.Manager, id contexts.Identity, t0 time.Time, phases map[string][]time.Duration) (undrawn bool, err error) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		h, err := dm.Health(ctx, id)
		if err != nil {
			return false, err
		}
		if h.Browser {
			phases["browser"] = append(phases["browser"], time.Since(t0))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	ps, err := dm.Timeline(ctx, id)
	if err != nil {
		return false, err
	}
	before := map[string]time.Time{}
	for _, p := range ps {
		// A warm desktop's parts started before the create: not a phase
		// of it.
		if !p.At.Before(t0) {
			phases[p.Name] = append(phases[p.Name], p.At.Sub(t0))
		} else {
			before[p.Name] = p.At
		}
	}
	// A warm desktop's own start and drawing (what the pool's warm-up
	// bounds the drawing by: docs/desktop.md).
	if start, wm := before["start:sandbox"], before["wm"]; !start.IsZero() && !wm.IsZero() {
		phases["warm:wm"] = append(phases["warm:wm"], wm.Sub(start))
		if drawn := before["drawn"]; !drawn.IsZero() {
			phases["warm:drawn"] = append(phases["warm:drawn"], drawn.Sub(wm))
		}
	}
	return !before["undrawn"].IsZero(), nil
}

// phaseFigures are the phases' latencies from the create's start, in
// the order of their medians.
func phaseFigures(kind string, phases map[string][]time.Duration) []Figure {
	var out []Figure
	for name, ds := range phases {
		what := phaseNames[name]
		if what == "" {
			what = strings.TrimPrefix(name, "start:") + " started"
		}
		f := Latency(fmt.Sprintf("desktop %s, phase: %s", kind, what), ds)
		f.Note = "from the create's start"
		switch {
		case name == "browser":
			f.Note = "polled after the screenshot, every ~0.1 s"
		case name == "warm:wm":
			f.Note = "before the take"
		case name == "warm:drawn":
			f.Note = "before the take, of the warm-ups drawn in time"
		}
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].P50 < out[j].P50 })
	return out
}
