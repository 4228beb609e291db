package desktop

import (
	"context"
	_ "embed"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/contexts"
)

// Window is one visible window of a desktop.
type Window struct {
	ID     string `json:"id"` // the X window id, as xdotool takes it
	Title  string `json:"title"`
	Active bool   `json:"active,omitempty"`
}

// WindowList is the desktop's visible, titled windows.
type WindowList struct {
	Windows []Window `json:"windows"`
}

// maxWindows bounds the list: a sandbox may open windows without end.
const maxWindows = 200

// windowsScript prints the active window's id, then one line per visible
// window with a title: its id, a tab, its title.
const windowsScript = `xdotool getactivewindow 2>/dev/null || echo
for w in $(xdotool search --onlyvisible --name '.' 2>/dev/null | head -n ` + "200" + `); do
  t=$(xdotool getwindowname "$w" 2>/dev/null) && [ -n "$t" ] && printf '%s\t%s\n' "$w" "$t"
done; exit 0`

// Windows lists the session's visible windows with their titles (text
// from the sandbox: it passes the guard).
func (m *Manager) Windows(ctx context.Context, id contexts.Identity) (*WindowList, error) {
	out := &WindowList{Windows: []Window{}}
	err := m.use(ctx, id, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		s, err := m.output(ctx, sb, "/bin/bash", "-c", windowsScript)
		if err != nil {
			return err
		}
		active, rest, _ := strings.Cut(s, "\n")
		active = strings.TrimSpace(active)
		for _, line := range strings.Split(rest, "\n") {
			wid, title, ok := strings.Cut(line, "\t")
			if _, err := strconv.ParseUint(wid, 10, 64); !ok || err != nil || len(out.Windows) >= maxWindows {
				continue
			}
			out.Windows = append(out.Windows, Window{ID: wid, Title: title, Active: wid == active})
		}
		return nil
	})
	return out, err
}

// Clipboard is the text on a desktop's clipboard.
type Clipboard struct {
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
}

// maxClipboard bounds the clipboard text returned.
const maxClipboard = 64 << 10

//go:embed clipboard.py
var clipboardPy string

// Clipboard reads the session's clipboard (the CLIPBOARD selection, as
// text; empty when nothing was copied). The text passes the guard.
func (m *Manager) Clipboard(ctx context.Context, id contexts.Identity) (*Clipboard, error) {
	var out *Clipboard
	err := m.use(ctx, id, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		s, err := m.output(ctx, sb, "python3", "-c", clipboardPy, strconv.Itoa(maxClipboard+1))
		if err != nil {
			return err
		}
		out = &Clipboard{Text: s}
		if len(s) > maxClipboard {
			out.Text, out.Truncated = strings.ToValidUTF8(s[:maxClipboard], ""), true
		}
		return nil
	})
	return out, err
}
