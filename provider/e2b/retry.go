package e2b

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// Retries: an idempotent call (marked by idempotent on its context) that
// meets a transient failure is tried again, at most DefaultRetries more
// times, after an exponential backoff with jitter, or after the wait a
// 429 or 503 names in Retry-After. Transient: the connection refused,
// reset or closed before an answer, a dial or header timeout, and the
// answers 429, 502, 503 and 504. The caller's context bounds it all: the
// wait ends when the context does, and a Retry-After past its deadline is
// not waited for (the answer goes back at once).
//
// Only calls that can be repeated without harm are marked: control-plane
// reads (sandbox info, list, metrics), file reads, the timeout refresh
// (it sets an absolute time) and the kill (a second one finds nothing).
// A create, a command, a code cell and any other write are sent once: a
// repeat could start a second sandbox or run code twice.
const (
	// DefaultRetries is how many times an idempotent call is tried again
	// after a transient failure.
	DefaultRetries = 3

	retryFirst = 200 * time.Millisecond // first backoff step
	retryCap   = 2 * time.Second        // longest backoff step
	// retryAfterCap bounds a Retry-After honoured; a longer one is
	// returned to the caller at once.
	retryAfterCap = 30 * time.Second
)

type idempotentKey struct{}

// idempotent marks ctx's calls as safe to repeat.
func idempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotentKey{}, true)
}

func isIdempotent(ctx context.Context) bool {
	v, _ := ctx.Value(idempotentKey{}).(bool)
	return v
}

// retryTransport repeats marked requests on transient failures.
type retryTransport struct {
	base    http.RoundTripper
	retries int
}

func (t *retryTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	ctx := r.Context()
	if !isIdempotent(ctx) || (r.Body != nil && r.Body != http.NoBody && r.GetBody == nil) {
		return base.RoundTrip(r)
	}
	for attempt := 0; ; attempt++ {
		req := r
		if attempt > 0 && r.GetBody != nil {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			req = r.Clone(ctx)
			req.Body = body
		}
		resp, err := base.RoundTrip(req)
		if attempt >= t.retries || !transient(ctx, resp, err) {
			return resp, err
		}
		wait, ok := backoff(ctx, attempt, resp)
		if !ok {
			return resp, err // a Retry-After past the deadline: answer now
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// transient reports whether a try's outcome may pass if tried again.
func transient(ctx context.Context, resp *http.Response, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		var ne net.Error
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
			errors.As(err, &ne) && ne.Timeout()
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoff is the wait before try attempt+2: the answer's Retry-After when
// it names one, else retryFirst doubled per try up to retryCap, a random
// share of it between a half and the whole (so clients that failed
// together do not come back together). False: the wait would outlast the
// caller's deadline or retryAfterCap.
func backoff(ctx context.Context, attempt int, resp *http.Response) (time.Duration, bool) {
	var wait time.Duration
	if d, ok := retryAfter(resp); ok {
		wait = d
		if wait > retryAfterCap {
			return 0, false
		}
	} else {
		step := min(retryFirst<<attempt, retryCap)
		wait = step/2 + rand.N(step/2+1)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return 0, false
	}
	return wait, true
}

// retryAfter reads an answer's Retry-After (seconds or an HTTP date).
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		if n > int64(retryAfterCap/time.Second) {
			return retryAfterCap + 1, true
		}
		return time.Duration(n) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(time.Until(at), 0), true
	}
	return 0, false
}
