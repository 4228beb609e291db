package desktop_test

import (
	"bytes"
	"context"
	"image/png"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
)

// TestFirstScreenshotIsDrawn: a session opened on a new desktop returns
// once the desktop is drawn, so its first screenshot shows XFCE (its
// backdrop, icons and panels: over 3000 colours; about 1400 without the
// panels painted), not the black screen with the pointer that the X
// server shows for seconds after XFCE's processes run (2 colours). The wait is a bound (the stream-ready wait);
// here it is long enough for a loaded machine.
func TestFirstScreenshotIsDrawn(t *testing.T) {
	dm, _ := newManagers(t, desktop.Config{StreamWait: 3 * time.Minute})
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t1", ConversationID: "drawn", PathID: "main"}
	start := time.Now()
	shot, err := dm.Screenshot(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	img, err := png.Decode(bytes.NewReader(shot.PNG))
	if err != nil {
		t.Fatal(err)
	}
	n := colours(img)
	t.Logf("first screenshot after %s: %d colours", took.Round(time.Millisecond), n)
	if n < 2500 {
		t.Errorf("the first screenshot of a new desktop has %d colours: not drawn yet", n)
	}
	tl, err := dm.Timeline(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var drawn, wm time.Time
	for _, p := range tl {
		switch p.Name {
		case "drawn":
			drawn = p.At
		case "wm":
			wm = p.At
		}
	}
	if drawn.IsZero() || drawn.Before(wm) || drawn.After(start.Add(took)) {
		t.Errorf("timeline %v: want drawn after the window manager and before the screenshot returned", tl)
	} else {
		t.Logf("window manager at %s, drawn at %s from the open", wm.Sub(start).Round(time.Millisecond), drawn.Sub(start).Round(time.Millisecond))
	}
}

// TestDrawnWaitBounded: the wait for the drawing is bounded by the
// stream-ready wait: with a wait shorter than XFCE's drawing, the session
// opens anyway, its timeline says the wait ran out ("undrawn"), and the
// create's warm-up that ran out is counted (sandlot.desktop.undrawn,
// stage create).
func TestDrawnWaitBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	dm, _ := newManagers(t, desktop.Config{StreamWait: time.Millisecond, Meter: meter})
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t1", ConversationID: "bounded", PathID: "main"}
	if _, err := dm.Screenshot(ctx, id); err != nil {
		t.Fatal(err)
	}
	tl, err := dm.Timeline(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range tl {
		seen[p.Name] = true
	}
	if !seen["undrawn"] || !seen["wm"] {
		t.Errorf("timeline %v: want the window manager, then the wait for the drawing run out", tl)
	}
	if n := undrawn(t, reader)["create"]; n != 1 {
		t.Errorf("undrawn counted %d for the create's warm-up, want 1", n)
	}
}

// TestPoolWarmDrawn: a pool's warm-up (a fill) is not
// bounded by the create's stream-ready wait: it waits until the desktop
// is drawn (at most poolDrawWait after the window manager), so the desktop a
// create takes is drawn before the take, and its first call does not
// look again. Before, a warm-up whose drawing outlasted the stream-ready
// wait (every one on a loaded 2-core machine, with the default 3 s) was
// offered still drawing ("undrawn" before the take), silently.
func TestPoolWarmDrawn(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	dm, cm := newPooled(t, desktop.Config{StreamWait: time.Millisecond, Meter: meter}, 1)
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t1", ConversationID: "pooled", PathID: "main"}
	if _, err := dm.Screenshot(ctx, id); err != nil {
		t.Fatal(err)
	}
	if hits := cm.Stats().PerTemplate[desktop.Template].PoolHits; hits != 1 {
		t.Fatalf("pool hits %d: the create did not take the warm desktop", hits)
	}
	tl, err := dm.Timeline(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	at := phaseTimes(tl)
	if !at["undrawn"].IsZero() || at["drawn"].IsZero() || at["host:sandbox"].IsZero() || !at["drawn"].Before(at["host:sandbox"]) {
		t.Errorf("timeline %v: want the desktop drawn by its warm-up, before the take (host:sandbox)", tl)
	} else {
		t.Logf("warm-up: window manager %s after the sandbox's start, drawn %s after it", at["wm"].Sub(at["start:sandbox"]), at["drawn"].Sub(at["wm"]))
	}
	if n := undrawn(t, reader); len(n) != 0 {
		t.Errorf("undrawn counted %v, want none", n)
	}
}

// undrawn reads sandlot.desktop.undrawn by stage.
func undrawn(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "sandlot.desktop.undrawn" {
				for _, p := range d.DataPoints {
					stage, _ := p.Attributes.Value("stage")
					out[stage.AsString()] += p.Value
				}
			}
		}
	}
	return out
}

// phaseTimes maps a timeline's phases to their times by name.
func phaseTimes(tl []desktop.Phase) map[string]time.Time {
	at := map[string]time.Time{}
	for _, p := range tl {
		at[p.Name] = p.At
	}
	return at
}
