package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// warnLog keeps the last few warnings and errors a manager logs, and the
// info lines that say a sandbox went (destroyed, dropped, lost), for a
// case whose failure should say what the manager met (the cases'
// managers log nowhere otherwise).
type warnLog struct {
	mu    sync.Mutex
	lines []string
}

// warnLogKeep bounds what a warnLog keeps: its newest lines.
const warnLogKeep = 20

func newWarnLog() *warnLog { return &warnLog{} }

// Logger returns a logger that records into w.
func (w *warnLog) Logger() *slog.Logger { return slog.New(warnHandler{w: w}) }

// String is the kept lines, oldest first, "; "-joined ("" for none).
func (w *warnLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "; ")
}

type warnHandler struct {
	w     *warnLog
	attrs []slog.Attr
}

func (h warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

// sandboxGone are words of the info lines a warnLog keeps: the manager
// saying it destroyed or dropped a sandbox or a context.
var sandboxGone = []string{"destroy", "dropping", "lost", "ended elsewhere"}

func (h warnHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn && !slices.ContainsFunc(sandboxGone, func(w string) bool { return strings.Contains(r.Message, w) }) {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	h.w.lines = append(h.w.lines, b.String())
	if len(h.w.lines) > warnLogKeep {
		h.w.lines = h.w.lines[len(h.w.lines)-warnLogKeep:]
	}
	return nil
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{w: h.w, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

// WithGroup keeps the group's attributes unqualified: the lines are for
// people reading a failure.
func (h warnHandler) WithGroup(string) slog.Handler { return h }
