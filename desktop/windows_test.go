package desktop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
)

// TestWindowsAndClipboard (crun, the real image): the window list names
// the browser's window by its page's title, and the
// clipboard holds the address Chromium copied, read over the X selection
// protocol (the image has no clipboard tool).
func TestWindowsAndClipboard(t *testing.T) {
	dm, _ := newManagers(t, desktop.Config{})
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t1", ConversationID: "win", PathID: "main"}
	clip, err := dm.Clipboard(ctx, id)
	if err != nil || clip.Text != "" {
		t.Fatalf("clipboard of a new desktop: %+v, %v", clip, err)
	}
	const page = "http://127.0.0.1:6080/vnc.html"
	if _, err := dm.Act(ctx, id, desktop.Action{Kind: "open_url", Text: page}); err != nil {
		t.Fatal(err)
	}
	poll(t, "a window titled noVNC", func() (string, bool) {
		wl, err := dm.Windows(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wl.Windows {
			if strings.Contains(w.Title, "noVNC") && w.ID != "" {
				return "", true
			}
		}
		return fmt.Sprintf("%+v", wl.Windows), false
	})
	poll(t, "the copied address on the clipboard", func() (string, bool) {
		if _, err := dm.Act(ctx, id, desktop.Action{Kind: "click", X: 512, Y: 400}); err != nil { // the browser's focus
			t.Fatal(err)
		}
		for _, k := range []string{"ctrl+l", "ctrl+c"} {
			if _, err := dm.Act(ctx, id, desktop.Action{Kind: "key", Text: k}); err != nil {
				t.Fatal(err)
			}
		}
		c, err := dm.Clipboard(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c.Text, strings.Contains(c.Text, "127.0.0.1:6080/vnc.html")
	})
}

// poll calls f until it reports done, for at most two minutes.
func poll(t *testing.T, what string, f func() (string, bool)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		var ok bool
		if last, ok = f(); ok {
			return
		}
	}
	t.Fatalf("no %s in 2 minutes (last %q)", what, last)
}
