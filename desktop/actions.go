package desktop

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Action is one input to a desktop: what the click, move, type, key,
// scroll and open-URL tools ask for.
type Action struct {
	Kind   string // click, double_click, move, type, key, scroll, open_url
	X, Y   int    // click, double_click, move (both 0 with click: where the pointer is)
	Button string // click: left (default), middle, right
	Text   string // type: the text; key: a combination (ctrl+s, Return); open_url: the URL
	Dir    string // scroll: up, down (default), left, right
	Amount int    // scroll: clicks of the wheel (default 1)
}

// ActionResult is what the desktop shows after an action: the title of
// the active window, which passes the guard like any text from a sandbox.
type ActionResult struct {
	ActiveWindow string `json:"activeWindow"`
}

// Limits on actions' arguments.
const (
	maxText  = 4096
	maxURL   = 8192
	maxCoord = 16384
	maxWheel = 50
)

var (
	buttons = map[string]string{"": "1", "left": "1", "middle": "2", "right": "3"}
	wheel   = map[string]string{"up": "4", "": "5", "down": "5", "left": "6", "right": "7"}
	// keyRE is an xdotool key combination: keysym names joined by +.
	keyRE = regexp.MustCompile(`^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$`)
)

// argv checks a and returns the command that performs it.
func (a Action) argv(w, h int) ([]string, error) {
	bad := func(format string, args ...any) ([]string, error) {
		return nil, fmt.Errorf("desktop "+a.Kind+": "+format+": %w", append(args, errdefs.ErrInvalidArgument)...)
	}
	pos := func() error {
		if a.X < 0 || a.Y < 0 || a.X >= min(w, maxCoord) || a.Y >= min(h, maxCoord) {
			return fmt.Errorf("desktop %s: (%d, %d) is outside the %dx%d screen: %w", a.Kind, a.X, a.Y, w, h, errdefs.ErrInvalidArgument)
		}
		return nil
	}
	switch a.Kind {
	case "move":
		if err := pos(); err != nil {
			return nil, err
		}
		return []string{"xdotool", "mousemove", itoa(a.X), itoa(a.Y)}, nil
	case "click", "double_click":
		b, ok := buttons[a.Button]
		if !ok {
			return bad("button %q (left, middle, right)", a.Button)
		}
		if err := pos(); err != nil {
			return nil, err
		}
		argv := []string{"xdotool", "mousemove", itoa(a.X), itoa(a.Y), "click"}
		if a.Kind == "double_click" {
			argv = append(argv, "--repeat", "2")
		}
		return append(argv, b), nil
	case "type":
		if a.Text == "" || len(a.Text) > maxText {
			return bad("text of 1 to %d bytes", maxText)
		}
		return []string{"xdotool", "type", "--delay", "8", "--", a.Text}, nil
	case "key":
		if !keyRE.MatchString(a.Text) || len(a.Text) > 256 {
			return bad("key %q: keysym names joined by + (ctrl+s, Return, alt+F4)", a.Text)
		}
		return []string{"xdotool", "key", "--", a.Text}, nil
	case "scroll":
		b, ok := wheel[a.Dir]
		if !ok {
			return bad("direction %q (up, down, left, right)", a.Dir)
		}
		n := a.Amount
		if n == 0 {
			n = 1
		}
		if n < 1 || n > maxWheel {
			return bad("amount %d (1 to %d)", a.Amount, maxWheel)
		}
		return []string{"xdotool", "click", "--repeat", itoa(n), b}, nil
	case "open_url":
		u, err := url.Parse(a.Text)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(a.Text) > maxURL {
			return bad("url %q: an http or https URL", a.Text)
		}
		return []string{"/bin/bash", "-c", openScript, "desktop-open", url.QueryEscape(u.String())}, nil
	}
	return bad("unknown action (click, double_click, move, type, key, scroll, open_url)")
}

// Act performs a on the session of id and returns the active window's
// title.
func (m *Manager) Act(ctx context.Context, id contexts.Identity, a Action) (*ActionResult, error) {
	argv, err := a.argv(m.cfg.Width, m.cfg.Height)
	if err != nil {
		return nil, err
	}
	var out ActionResult
	err = m.use(ctx, id, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		if a.Kind == "open_url" {
			title, err := m.open(ctx, identity(id), rec.ID, sb, argv)
			out.ActiveWindow = title
			return err
		}
		// The action and the active window's title in one exec: the
		// arguments reach xdotool as argv ("$@"), never the shell's
		// parser. The title may fail (no window has the focus).
		title, err := m.output(ctx, sb, append([]string{"/bin/bash", "-c", `"$@" >/dev/null || exit; xdotool getactivewindow getwindowname 2>/dev/null; exit 0`, "desktop-action"}, argv...)...)
		if err != nil {
			return err
		}
		out.ActiveWindow = strings.TrimSpace(title)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// openWait is how long open_url waits for a starting browser to answer.
const openWait = 100 * time.Second

// openScript hands a URL ($1, query-escaped) to the session's browser
// through its DevTools endpoint, as a new tab in front, and prints the
// active window's title. It exits 10 when no browser runs or starts (the
// lock is free) unless $2 says one was just started; it waits while one
// starts.
var openScript = fmt.Sprintf(`if [ "$2" != started ]; then
  exec 9>>%[1]s
  flock -n 9 && exit 10
  exec 9>&-
fi
end=$(( $(date +%%s) + %[3]d ))
until curl -fsS -m 5 -X PUT -o /dev/null "http://127.0.0.1:%[2]d/json/new?$1"; do
  [ "$(date +%%s)" -lt "$end" ] || { echo "the browser did not answer in %[3]d s" >&2; exit 3; }
  sleep 0.1
done
xdotool getactivewindow getwindowname 2>/dev/null
exit 0`, browserLock, DevToolsPort, int(openWait.Seconds()))

// open runs argv (openScript) in the session, starting the browser first
// when none runs, and returns the active window's title.
func (m *Manager) open(ctx context.Context, did contexts.Identity, contextID string, sb contexts.Sandbox, argv []string) (string, error) {
	run := func(argv []string) (*agent.ExecResult, error) {
		return sb.Exec(ctx, agent.ExecParams{Argv: argv, Env: map[string]string{"DISPLAY": ":0"}, TimeoutMs: openWait.Milliseconds() + 20_000, Tag: "desktop"}, nil)
	}
	res, err := run(argv)
	if err == nil && res.ExitCode == 10 { // no browser runs: start one, then wait for it
		m.spawn(did, contextID, browserScript, browserEnv, "desktop-browser")
		res, err = run(append(argv, "started"))
	}
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 || res.TimedOut {
		return "", fmt.Errorf("desktop open_url: exit %d: %s: %w", res.ExitCode, strings.TrimSpace(res.Stderr), errdefs.ErrUnavailable)
	}
	return strings.TrimSpace(res.Stdout), nil
}

// LiveView is the URL of a session's live view (noVNC in a browser).
type LiveView struct {
	URL string `json:"url"`
	// ViewOnly: the viewer cannot send input.
	ViewOnly bool `json:"viewOnly"`
}

// LiveView opens (or reuses) the session of id and returns its live
// view's URL, which carries the session's VNC password: whoever has the
// URL sees the screen (and, unless viewOnly, drives it).
func (m *Manager) LiveView(ctx context.Context, id contexts.Identity, viewOnly bool) (*LiveView, error) {
	if m.cfg.LiveURL == nil || m.cfg.Network == nil {
		return nil, fmt.Errorf("desktop live view: this daemon serves no sandbox ports (serve --network): %w", errdefs.ErrFailedPrecondition)
	}
	var out *LiveView
	err := m.use(ctx, id, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		m.mu.Lock()
		s := m.sessions[rec.ID]
		m.mu.Unlock()
		if s == nil {
			return fmt.Errorf("desktop session %s ended: %w", rec.ID, errdefs.ErrUnavailable)
		}
		q := url.Values{"autoconnect": {"true"}, "resize": {"scale"}, "password": {s.password}}
		if viewOnly {
			q.Set("view_only", "true")
		}
		out = &LiveView{URL: strings.TrimSuffix(m.cfg.LiveURL(rec.ID, StreamPort), "/") + "/vnc.html?" + q.Encode(), ViewOnly: viewOnly}
		return nil
	})
	return out, err
}
