package desktop_test

import (
	"bytes"
	"context"
	"image/png"
	"testing"
	"time"

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
// opens anyway, and its timeline says the wait ran out ("undrawn").
func TestDrawnWaitBounded(t *testing.T) {
	dm, _ := newManagers(t, desktop.Config{StreamWait: time.Millisecond})
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
}
