package server

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/sandlot/sandlot/agent"
)

// A call's streamed stdout and stderr are coalesced before they go to the
// host (a terminal's output is not: see coalesced): the writes a cell or
// process makes within Config.OutputWindow of the first one pending go out
// as one output event, as a Jupyter kernel's stream does (python's print
// writes its text and its newline apart, and a reader that wakes between
// them would otherwise send two events). The pending
// text goes out at the window's end, at coalesceMax bytes, before an event
// of another stream or kind, and at the call's end before its reply, so
// the reply waits for nothing and the order of events is kept.

const (
	// DefaultOutputWindow is Config.OutputWindow's zero value: a few ms,
	// unnoticed by a person or a model reading the stream, and long
	// enough that a loop of prints goes out as a handful of events.
	DefaultOutputWindow = 5 * time.Millisecond
	// coalesceMax bounds the pending text of one call.
	coalesceMax = 64 << 10
)

// coalescer is one call's output emitter.
type coalescer struct {
	c      *conn
	ref    uint64
	window time.Duration // negative: no coalescing

	mu sync.Mutex
	// stream and pending are the text not yet sent, of one stream.
	stream  string
	pending []byte
	timer   *time.Timer // flushes pending at the window's end; made on first use
	closed  bool        // the call is ending: its events are dropped
}

func newCoalescer(c *conn, ref uint64) *coalescer {
	w := c.s.cfg.OutputWindow
	if w == 0 {
		w = DefaultOutputWindow
	}
	return &coalescer{c: c, ref: ref, window: w}
}

// emit is the call's output callback. Safe for concurrent use.
func (q *coalescer) emit(ev agent.OutputEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return // the host would read it as output for an unknown call
	}
	if q.window < 0 || ev.Data == "" || ev.Result != nil || !coalesced(ev.Stream) {
		q.flushLocked()
		q.send(ev)
		return
	}
	if len(q.pending) > 0 && (ev.Stream != q.stream || len(q.pending)+len(ev.Data) > coalesceMax) {
		q.flushLocked()
	}
	if len(ev.Data) >= coalesceMax {
		q.send(ev)
		return
	}
	if len(q.pending) == 0 {
		q.stream = ev.Stream
		if q.timer == nil {
			q.timer = time.AfterFunc(q.window, q.fire)
		} else {
			q.timer.Reset(q.window)
		}
	}
	q.pending = append(q.pending, ev.Data...)
}

// coalesced says whether events of stream carry text that may be joined:
// stdout and stderr only. A terminal's output goes out as read, as E2B's
// envd sends it: a keystroke's echo must not wait for the window.
func coalesced(stream string) bool {
	return stream == agent.Stdout || stream == agent.Stderr
}

// fire is the window's end. A fire that comes late (its text went out
// with a later event) sends what is pending now, early: never wrong.
func (q *coalescer) fire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.flushLocked()
	}
}

// close sends what is pending and stops the timer. Called before the
// reply: a later event is dropped, since the host reads output after the
// reply as output for an unknown call and closes the connection (no caller
// emits after the close today).
func (q *coalescer) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flushLocked()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.pending = nil
}

// flushLocked sends the pending text. Precondition: q.mu is held.
func (q *coalescer) flushLocked() {
	if len(q.pending) == 0 {
		return
	}
	ev := agent.OutputEvent{Stream: q.stream, Data: string(q.pending)}
	q.pending = q.pending[:0]
	q.send(ev)
}

// send writes ev as an output notification of the call. Precondition:
// q.mu is held (it orders the frames of the call).
func (q *coalescer) send(ev agent.OutputEvent) {
	ev.Ref = q.ref
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	frame := make([]byte, 0, len(b)+48)
	frame = append(frame, `{"jsonrpc":"2.0","method":"output","params":`...)
	frame = append(frame, b...)
	frame = append(frame, "}\n"...)
	if len(frame) > agent.MaxFrame {
		return // never send what the host must reject
	}
	q.c.write(frame)
}
