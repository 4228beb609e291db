// Package slowbody bounds the time a request body may take to arrive, so
// a client that trickles one (slowloris) is cut off while a large upload
// at a fair pace is not. The daemon's front door arms it on every request
// of every surface but sandbox ports; a handler that reads the body gets
// ErrTimeout once the deadline passes (the /v1 API answers it 408).
package slowbody

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// ErrTimeout ends the read of a body that did not arrive in time.
var ErrTimeout = errors.New("request body read timed out")

// Arm bounds the arrival of r's body: timeout, plus one second per minRate
// bytes received. The deadline is the connection's read deadline, lifted
// when the body ends: after that the server's background read watches for
// the client going away, and a deadline would cancel long streaming
// responses. Requests without a body are left alone (their background
// read starts at once), as are those whose writer is not a net/http
// connection's (tests with a recorder).
func Arm(w http.ResponseWriter, r *http.Request, timeout time.Duration, minRate int64) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	b := &body{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(), timeout: timeout, minRate: minRate}
	b.set = b.start.Add(b.timeout)
	if err := b.rc.SetReadDeadline(b.set); err != nil {
		return
	}
	r.Body = b
}

// body is a request body under its deadline.
type body struct {
	io.ReadCloser
	rc      *http.ResponseController
	start   time.Time
	timeout time.Duration
	minRate int64

	n       int64
	set     time.Time // the deadline last set
	done    bool
	expired bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.expired {
		return 0, ErrTimeout
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		b.lift()
	case err != nil:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			b.expired = true
			return n, ErrTimeout
		}
	case n > 0 && !b.done:
		due := b.start.Add(b.timeout + time.Duration(b.n*int64(time.Second)/b.minRate))
		if due.Sub(b.set) >= time.Second {
			b.set = due
			_ = b.rc.SetReadDeadline(due)
		}
	}
	return n, err
}

func (b *body) lift() {
	if !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}
