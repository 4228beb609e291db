package desktop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
)

// TestWindowsAndClipboard (crun, the real image): the window list names
// the browser's window by its page's title, and the
// clipboard holds the address Chromium copied, read over the X selection
// protocol (the image has no clipboard tool).
func TestWindowsAndClipboard(t *testing.T) {
	t.Parallel()
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

// TestOpenURLWhileBrowserStarts (crun, the real image): a URL opened
// while the session's browser starts is the page in front once the
// browser is up. Two starters used to race: the session's (about:blank,
// after the call that opened it) and open_url's (`chromium -- URL`);
// whichever lost handed its page to the winner, and about:blank, when it
// came second, covered the URL. A loaded machine made that order by
// chance; here the session's sandbox has a chromium that starts
// about:blank 3 s late, so the order is that one every time. Then the
// browser dies, and open_url must start one itself.
func TestOpenURLWhileBrowserStarts(t *testing.T) {
	t.Parallel()
	dm, cm := newManagers(t, desktop.Config{})
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t1", ConversationID: "slow-browser", PathID: "main"}
	did := id
	did.PathID = desktop.PathPrefix + id.PathID
	const shim = `cat >/usr/local/bin/chromium <<'EOF'
#!/bin/sh
[ "$*" = about:blank ] && sleep 3
exec /usr/bin/chromium "$@"
EOF
chmod 755 /usr/local/bin/chromium`
	err := cm.Use(ctx, did, contexts.CreateOptions{Template: desktop.Template, Env: desktop.Env, MaxExecutions: -1}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		res, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/sh", "-c", shim}, User: agent.RootUser}, nil)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("shim: exit %d: %s", res.ExitCode, res.Stderr)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dm.Screenshot(ctx, id); err != nil { // the session; its browser starts after the call
		t.Fatal(err)
	}
	if _, err := dm.Act(ctx, id, desktop.Action{Kind: "open_url", Text: "http://127.0.0.1:6080/vnc.html"}); err != nil {
		t.Fatal(err)
	}
	frontStays(t, dm, id, "noVNC")

	// No browser at all (it died): open_url starts one (about:blank, 3 s
	// late again) and the URL is still the page in front once it is up.
	killBrowser(t, cm, "t1")
	if _, err := dm.Act(ctx, id, desktop.Action{Kind: "open_url", Text: "http://127.0.0.1:9222/json/version"}); err != nil {
		t.Fatal(err)
	}
	frontStays(t, dm, id, "9222/json/version")
}

// frontStays waits (a minute at most) until a window of the session of id
// is titled with want, and then wants it to stay so for five seconds.
func frontStays(t *testing.T, dm *desktop.Manager, id contexts.Identity, want string) {
	t.Helper()
	var last string
	seen := 0
	for deadline := time.Now().Add(time.Minute); seen < 5; time.Sleep(time.Second) {
		wl, err := dm.Windows(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		last = fmt.Sprintf("%+v", wl.Windows)
		switch {
		case strings.Contains(last, want):
			seen++
		case seen > 0 || time.Now().After(deadline):
			t.Fatalf("no window shows %q (it must stay in front once it is): %s", want, last)
		}
	}
}
