package tools

import (
	"context"
	"encoding/base64"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
)

// Desktop is what the desktop tools need (desktop.Manager implements it):
// each call opens or reuses the conversation path's desktop session.
type Desktop interface {
	Screenshot(ctx context.Context, id contexts.Identity) (*desktop.Screenshot, error)
	Act(ctx context.Context, id contexts.Identity, a desktop.Action) (*desktop.ActionResult, error)
	LiveView(ctx context.Context, id contexts.Identity, viewOnly bool) (*desktop.LiveView, error)
	Windows(ctx context.Context, id contexts.Identity) (*desktop.WindowList, error)
	Clipboard(ctx context.Context, id contexts.Identity) (*desktop.Clipboard, error)
}

var _ Desktop = (*desktop.Manager)(nil)

// noPixels is said in every desktop tool's description: the guard sees
// text, not pixels.
const noPixels = " The egress guard cannot redact pixels: whatever the screen shows (a secret in a page or a " +
	"terminal included) leaves in screenshots and the live view as it is; text returned (window titles) is redacted."

// desktopDescriptions are the model-facing descriptions of the desktop
// tools, offered only when the daemon runs desktop sessions.
var desktopDescriptions = map[string]string{
	"desktop_screenshot": "Take a screenshot of this conversation's desktop sandbox (a Linux desktop with a Chromium " +
		"browser; started on first use, it ends 15 minutes after its last call) and return it as a PNG image." + noPixels,
	"desktop_click":    "Click at a pixel of the desktop (coordinates as in the screenshot). Returns the active window's title." + noPixels,
	"desktop_move":     "Move the desktop's mouse pointer to a pixel. Returns the active window's title." + noPixels,
	"desktop_type":     "Type text into the desktop's focused window, as keystrokes. Returns the active window's title." + noPixels,
	"desktop_key":      "Press a key or key combination on the desktop (Return, ctrl+s, alt+F4). Returns the active window's title." + noPixels,
	"desktop_scroll":   "Scroll the desktop's mouse wheel where the pointer is. Returns the active window's title." + noPixels,
	"desktop_open_url": "Open an http or https URL in the desktop's browser (a new tab). Returns the active window's title." + noPixels,
	"desktop_live_view": "Return a URL where a person can watch (and, unless viewOnly, drive) this conversation's desktop " +
		"live in a browser. The URL carries the session's password: share it only with whoever may see the screen." + noPixels,
	"desktop_windows":   "List the desktop's visible windows: their ids, titles and which one is active." + noPixels,
	"desktop_clipboard": "Read the text on the desktop's clipboard (what was last copied there; at most 64 KiB)." + noPixels,
}

// ScreenshotResult is desktop_screenshot's result; MCP sends PNG as image
// content.
type ScreenshotResult struct {
	PNG    string `json:"png"` // base64
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// desktopHandlers are the desktop tools' handlers.
func (r *Registry) desktopHandlers() map[string]handler {
	d := r.cfg.Desktop
	act := func(kind string, fill func(args map[string]any, a *desktop.Action)) handler {
		return func(ctx context.Context, call Call, args map[string]any, _ contexts.OutputFunc) (any, error) {
			a := desktop.Action{Kind: kind}
			fill(args, &a)
			return d.Act(ctx, call.Identity, a)
		}
	}
	xy := func(args map[string]any, a *desktop.Action) {
		a.X, a.Y = int(integer(args, "x")), int(integer(args, "y"))
	}
	return map[string]handler{
		"desktop_screenshot": func(ctx context.Context, call Call, _ map[string]any, _ contexts.OutputFunc) (any, error) {
			s, err := d.Screenshot(ctx, call.Identity)
			if err != nil {
				return nil, err
			}
			return &ScreenshotResult{PNG: base64.StdEncoding.EncodeToString(s.PNG), Width: s.Width, Height: s.Height}, nil
		},
		"desktop_click": act("click", func(args map[string]any, a *desktop.Action) {
			xy(args, a)
			a.Button = str(args, "button")
			if boolean(args, "double") {
				a.Kind = "double_click"
			}
		}),
		"desktop_move":     act("move", xy),
		"desktop_type":     act("type", func(args map[string]any, a *desktop.Action) { a.Text = str(args, "text") }),
		"desktop_key":      act("key", func(args map[string]any, a *desktop.Action) { a.Text = str(args, "keys") }),
		"desktop_open_url": act("open_url", func(args map[string]any, a *desktop.Action) { a.Text = str(args, "url") }),
		"desktop_scroll": act("scroll", func(args map[string]any, a *desktop.Action) {
			a.Dir, a.Amount = str(args, "direction"), int(integer(args, "amount"))
		}),
		"desktop_windows": func(ctx context.Context, call Call, _ map[string]any, _ contexts.OutputFunc) (any, error) {
			return d.Windows(ctx, call.Identity)
		},
		"desktop_clipboard": func(ctx context.Context, call Call, _ map[string]any, _ contexts.OutputFunc) (any, error) {
			return d.Clipboard(ctx, call.Identity)
		},
		"desktop_live_view": func(ctx context.Context, call Call, args map[string]any, _ contexts.OutputFunc) (any, error) {
			return d.LiveView(ctx, call.Identity, boolean(args, "viewOnly"))
		},
	}
}
