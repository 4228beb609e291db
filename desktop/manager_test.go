package desktop_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/provider/local/localtest"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
)

// newManagers returns a desktop manager over a real contexts manager
// whose sandboxes run on crun from the desktop image.
func newManagers(t testing.TB, cfg desktop.Config) (*desktop.Manager, *contexts.Manager) {
	return newPooled(t, cfg, 0)
}

// newPooled is newManagers with a warm pool of pool started desktops
// (0: none), filled before it returns.
func newPooled(t testing.TB, cfg desktop.Config, pool int) (*desktop.Manager, *contexts.Manager) {
	t.Helper()
	imgs, _ := debiantest.Image(t, desktop.ImageConfig(), desktop.Template)
	cat := templates.New(templates.Config{Store: memory.New(), Images: imgs, Desktop: desktop.Settings()})
	log := slog.New(slog.DiscardHandler)
	p := localtest.New(t, local.Config{Runtime: "crun", Images: imgs, Templates: cat, Logger: log})
	// The pool's spec whatever its size, as the daemon sets it: a
	// desktop created anew is started by the same warm-up.
	ccfg := contexts.Config{PoolSize: -1, Catalog: cat, Logger: log,
		PoolSpecs: map[string]contexts.PoolSpec{desktop.Template: desktop.PoolSpec(pool, cfg)}}
	if pool > 0 {
		ccfg.PoolSizes = map[string]int{desktop.Template: pool}
	}
	cm := contexts.NewManager(memory.New(), p, ccfg)
	if err := cm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Minute); pool > 0 && cm.Stats().PerTemplate[desktop.Template].PoolSize < int64(pool); {
		if time.Now().After(deadline) {
			t.Fatalf("the desktop pool did not fill in 5 minutes: %+v", cm.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() { cm.Close(context.Background()) })
	cfg.Contexts = cm
	return desktop.New(cfg), cm
}

// TestManager drives a real desktop session: it starts with every part
// answering (X, window manager, browser, stream), a screenshot is a PNG of
// the configured size, typing reaches a window, the session is kept apart
// from the conversation's execution context, and it ends TTL after its
// last call.
func TestManager(t *testing.T) {
	t.Parallel()
	const ttl = 75 * time.Second // longer than one open on a loaded machine
	dm, cm := newManagers(t, desktop.Config{TTL: ttl, Width: 800, Height: 600})
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t1", ConversationID: "c1", PathID: "main"}

	start := time.Now()
	h, err := dm.Health(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("session open and healthy in %s: %+v", time.Since(start).Round(time.Millisecond), h)
	if !h.X || !h.WindowManager {
		t.Errorf("health after open = %+v, want X and the window manager", h)
	}
	// The browser starts in the background, and the open waits at most
	// StreamWait for the stream: on a loaded machine both answer later.
	deadline := time.Now().Add(90 * time.Second)
	for !h.OK() && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		if h, err = dm.Health(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if !h.OK() {
		t.Errorf("health = %+v, want everything", h)
	}
	// The start's timeline: the parts the readiness wait saw answer, and
	// the processes' starts, none before the sandbox's own.
	tl, err := dm.Timeline(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	at := phaseTimes(tl)
	t.Logf("timeline: %v", tl)
	for _, name := range []string{"start:sandbox", "start:Xvfb", "x", "start:xfwm4", "wm", "start:x11vnc", "start:chromium"} {
		if at[name].IsZero() {
			t.Errorf("timeline has no %q: %v", name, tl)
		} else if d := at[name].Sub(start); d < -time.Second || d > 3*time.Minute || at[name].Before(at["start:sandbox"]) {
			t.Errorf("timeline: %s at %s from the open, sandbox at %s", name, d, at["start:sandbox"].Sub(start))
		}
	}

	shot, err := dm.Screenshot(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(shot.PNG))
	if err != nil || cfg.Width != 800 || cfg.Height != 600 || shot.Width != 800 {
		t.Errorf("screenshot: %v, %dx%d", err, cfg.Width, cfg.Height)
	}

	for _, a := range []desktop.Action{
		{Kind: "move", X: 10, Y: 20},
		{Kind: "click", X: 400, Y: 300},
		{Kind: "scroll", Dir: "down", Amount: 2},
		{Kind: "key", Text: "Escape"},
	} {
		if _, err := dm.Act(ctx, id, a); err != nil {
			t.Errorf("%s: %v", a.Kind, err)
		}
	}
	res, err := dm.Act(ctx, id, desktop.Action{Kind: "open_url", Text: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("active window after open_url: %q", res.ActiveWindow)

	// A browser still starting is not a failed health check; one that
	// died is, and the health check starts it again.
	failures := func() int64 { return cm.TenantStats("t1").PerTemplate[desktop.Template].HealthCheckFailures }
	if n := failures(); n != 0 {
		t.Errorf("health check failures before anything stopped: %d", n)
	}
	killBrowser(t, cm, "t1")
	if h, err = dm.Health(ctx, id); err != nil || h.Browser {
		t.Errorf("health right after the browser was killed: %+v %v, want no browser", h, err)
	}
	for deadline := time.Now().Add(90 * time.Second); !h.OK() && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		if h, err = dm.Health(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if !h.OK() {
		t.Errorf("health after the browser died = %+v, want it started again", h)
	}
	if n := failures(); n < 1 {
		t.Errorf("health check failures after the browser died: %d, want it counted", n)
	}
	if n := cm.TenantStats("another").HealthCheckFailures; n != 0 {
		t.Errorf("another tenant's health check failures: %d", n)
	}

	// The session is a context of the desktop template on its own path;
	// the conversation's execution context is another.
	recs, err := cm.List(ctx, contexts.Filter{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range recs {
		if r.State.Active() {
			paths = append(paths, r.PathID+"="+r.Template)
		}
	}
	if len(paths) != 1 || paths[0] != "desktop:main=desktop" {
		t.Errorf("active contexts = %v, want the desktop session only", paths)
	}
	if _, err := dm.LiveView(ctx, id, false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("live view without ports: %v, want failed_precondition", err)
	}
	// Its expiry is TTL after the last call, and the cleanup then ends it
	// (its processes run in calls that never end, which must not keep it).
	var rec *contexts.Record
	for _, r := range recs {
		if r.State.Active() {
			rec = r
		}
	}
	if left := time.Until(rec.ExpiresAt); left < ttl-30*time.Second || left > ttl+time.Second {
		t.Errorf("session expires in %s, want about the %s TTL", left, ttl)
	}
	time.Sleep(time.Until(rec.ExpiresAt) + time.Second)
	if _, err := cm.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := cm.Get(ctx, "t1", rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State.Active() || got.Reason != contexts.ReasonExpired {
		t.Errorf("after its TTL the session is %s (%s), want ended: expired", got.State, got.Reason)
	}
}

// TestActionArgs: bad input to an action is invalid_argument before
// anything runs; text never reaches a shell.
func TestActionArgs(t *testing.T) {
	t.Parallel()
	dm := desktop.New(desktop.Config{Contexts: nil})
	for _, a := range []desktop.Action{
		{Kind: "move", X: -1, Y: 0},
		{Kind: "move", X: 1024, Y: 0},
		{Kind: "click", X: 1, Y: 1, Button: "fourth"},
		{Kind: "type", Text: ""},
		{Kind: "type", Text: strings.Repeat("a", 4097)},
		{Kind: "key", Text: "ctrl+s; rm -rf /"},
		{Kind: "key", Text: "$(reboot)"},
		{Kind: "scroll", Dir: "sideways"},
		{Kind: "scroll", Amount: 51},
		{Kind: "open_url", Text: "file:///etc/shadow"},
		{Kind: "open_url", Text: "javascript:alert(1)"},
		{Kind: "open_url", Text: "--remote-debugging-port=1"},
		{Kind: "drag"},
	} {
		t.Run(a.Kind+" "+a.Text, func(t *testing.T) {
			if _, err := dm.Act(context.Background(), contexts.Identity{TenantID: "t", ConversationID: "c"}, a); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("err = %v, want invalid_argument", err)
			}
		})
	}
}

// killBrowser kills Chromium in tenantID's active desktop session and
// waits until it is gone.
func killBrowser(t *testing.T, cm *contexts.Manager, tenantID string) {
	t.Helper()
	ctx := context.Background()
	recs, err := cm.List(ctx, contexts.Filter{TenantID: tenantID})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if !r.State.Active() {
			continue
		}
		err := cm.Use(ctx, r.Identity, contexts.CreateOptions{ContextID: r.ID}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
			res, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/bash", "-c",
				"pkill -KILL -x chromium; for i in $(seq 100); do pgrep -x chromium >/dev/null || exit 0; sleep 0.1; done; exit 1"}, TimeoutMs: 30_000}, nil)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("chromium still runs: exit %d %s", res.ExitCode, res.Stderr)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no active desktop session")
}
