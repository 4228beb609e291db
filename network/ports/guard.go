package ports

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Guard is the egress guard as the route applies it to what a sandbox
// answers: everything that leaves a sandbox passes the guard, and the
// route is one way out (docs/network-ports.md, "What the route carries").
type Guard interface {
	// Body returns the redactor of one response body of t's sandbox: its
	// first bytes decide text or a binary format, as for a file download.
	// Nil: the tenant's guard mode passes everything (off), and the
	// exchange is relayed as it is.
	Body(ctx context.Context, t Target) Redactor
	// Message returns the redactor of one WebSocket message, text or
	// binary as its frames say (no sniffing).
	Message(ctx context.Context, t Target, binary bool) Redactor
	// Text passes one header name or value.
	Text(ctx context.Context, t Target, s string) string
}

// Redactor is the guard's redactor of one body or message: what Write and
// Flush return may leave. The guard's file redactor is one.
type Redactor interface {
	Write(p []byte) []byte
	Flush() []byte
}

// IdleFlusher is a Redactor that can release what it holds when the
// sandbox goes quiet (a prompt, a partial line of a stream).
type IdleFlusher interface {
	FlushIdle() []byte
}

// IdleFlush is how long a guarded body may be quiet before the redactor
// releases what it holds, as for a call's output.
const IdleFlush = 200 * time.Millisecond

// guarded is a request's guard: the redactor of its response body and
// the target's guard for the rest.
type guarded struct {
	g    Guard
	ctx  context.Context
	t    Target
	body Redactor
}

func (gd *guarded) text(s string) string { return gd.g.Text(gd.ctx, gd.t, s) }

// guardRequest prepares the request to the sandbox for a guarded answer:
// whole bodies (no ranges: a range of a file is not judged as the file),
// in plain bytes (the guard reads no compressed body), and no WebSocket
// extension (permessage-deflate). An upgrade to anything but WebSocket is
// not asked for: its bytes would pass unread.
func guardRequest(h http.Header) {
	h.Del("Range")
	h.Del("If-Range")
	h.Set("Accept-Encoding", "identity")
	h.Del("Sec-Websocket-Extensions")
	if up := h.Get("Upgrade"); up != "" && !strings.EqualFold(up, "websocket") {
		h.Del("Upgrade")
		h.Del("Connection")
	}
}

// errUnguardable is a response the guard cannot read, answered 502.
var errUnguardable = errors.New("unguardable")

// guardResponse wraps res so that what it carries passes the guard: the
// body streams through the redactor (gzip is decoded first; any other
// encoding is refused), a WebSocket's messages through the guard, every
// header and trailer through it. It refuses (errUnguardable) what it
// cannot read.
func (gd *guarded) guardResponse(res *http.Response) error {
	if res.StatusCode == http.StatusSwitchingProtocols {
		if !strings.EqualFold(res.Header.Get("Upgrade"), "websocket") || res.Header.Get("Sec-Websocket-Extensions") != "" {
			return fmt.Errorf("%w: the sandbox switched to %q (with extensions %q); the ports route carries HTTP and plain WebSocket",
				errUnguardable, res.Header.Get("Upgrade"), res.Header.Get("Sec-Websocket-Extensions"))
		}
		rwc, ok := res.Body.(io.ReadWriteCloser)
		if !ok {
			return fmt.Errorf("%w: a protocol switch without a connection", errUnguardable)
		}
		res.Body = newWSGuard(rwc, func(binary bool) Redactor { return gd.g.Message(gd.ctx, gd.t, binary) })
		return nil
	}
	body := res.Body
	switch enc := strings.ToLower(strings.TrimSpace(res.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return fmt.Errorf("%w: a gzip body that does not decode: %v", errUnguardable, err)
		}
		body = struct {
			io.Reader
			io.Closer
		}{zr, res.Body}
	default:
		return fmt.Errorf("%w: the sandbox answered in Content-Encoding %q, which the guard cannot read (the route asks for identity)", errUnguardable, enc)
	}
	// The guard may change the body's length, and what it holds back is
	// no longer a range or a digest of the original.
	for _, k := range []string{"Content-Encoding", "Content-Length", "Content-Md5", "Digest", "Content-Digest", "Repr-Digest", "Accept-Ranges"} {
		res.Header.Del(k)
	}
	res.ContentLength = -1
	res.Body = newGuardedBody(body, gd.body, func() { guardHeader(res.Trailer, gd.text) })
	return nil
}

// guardHeader passes every name and value of h through text; a header
// whose name changes is dropped.
func guardHeader(h http.Header, text func(string) string) {
	for k, vs := range h {
		if text(k) != k {
			delete(h, k)
			continue
		}
		for i, v := range vs {
			vs[i] = text(v)
		}
	}
}

// guardedWriter guards the headers of every response the route writes
// (the sandbox's, and 1xx responses the reverse proxy relays as they
// come) just before they go out.
type guardedWriter struct {
	http.ResponseWriter
	text func(string) string
}

func (w *guardedWriter) WriteHeader(code int) {
	guardHeader(w.Header(), w.text)
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// guardedBody streams a body through a redactor. A reader goroutine
// feeds it, so that a body that goes quiet for IdleFlush has what the
// redactor holds released (an event stream's partial line, a prompt).
// At the end the redactor's tail is flushed; after an error it is
// dropped, never emitted unscanned. Close guards the trailers (after the
// body's end, when the transport has them).
type guardedBody struct {
	src      io.ReadCloser
	red      Redactor
	onClose  func()
	ch       chan chunk
	stop     chan struct{}
	started  sync.Once // the pump
	once     sync.Once // Close
	out      []byte
	err      error
	released bool // the redactor released its hold since the last chunk
}

type chunk struct {
	data []byte
	err  error
}

func newGuardedBody(src io.ReadCloser, red Redactor, onClose func()) *guardedBody {
	return &guardedBody{src: src, red: red, onClose: onClose, ch: make(chan chunk), stop: make(chan struct{})}
}

func (b *guardedBody) pump() {
	for {
		buf := make([]byte, 32<<10)
		n, err := b.src.Read(buf)
		select {
		case b.ch <- chunk{buf[:n], err}:
		case <-b.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (b *guardedBody) Read(p []byte) (int, error) {
	// The pump starts with the first read: reading the body fills the
	// response's trailers, which the reverse proxy reads before it.
	b.started.Do(func() { go b.pump() })
	for len(b.out) == 0 && b.err == nil {
		b.next()
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	if len(b.out) == 0 && b.err != nil {
		return n, b.err
	}
	return n, nil
}

// next takes the next chunk through the redactor. When the body has been
// quiet for IdleFlush, it has the redactor release what it holds, once
// per quiet spell.
func (b *guardedBody) next() {
	var quiet <-chan time.Time
	if _, ok := b.red.(IdleFlusher); ok && !b.released {
		t := time.NewTimer(IdleFlush)
		defer t.Stop()
		quiet = t.C
	}
	select {
	case c := <-b.ch:
		b.released = false
		if len(c.data) > 0 {
			b.out = append(b.out, b.red.Write(c.data)...)
		}
		switch {
		case c.err == io.EOF:
			b.out = append(b.out, b.red.Flush()...)
			b.err = io.EOF
		case c.err != nil:
			b.err = c.err // what the redactor holds is dropped
		}
	case <-quiet:
		b.released = true
		b.out = append(b.out, b.red.(IdleFlusher).FlushIdle()...)
	case <-b.stop:
		b.err = io.ErrClosedPipe
	}
}

func (b *guardedBody) Close() error {
	err := b.src.Close()
	b.once.Do(func() {
		close(b.stop)
		if b.onClose != nil {
			b.onClose()
		}
	})
	return err
}
