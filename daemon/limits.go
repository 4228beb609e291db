package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

// AdmissionConfig sizes an Admission.
type AdmissionConfig struct {
	// MaxInFlight bounds the requests the server works on at once, all
	// tenants and anonymous callers together (health probes and /metrics
	// excepted). Zero: DefaultMaxInFlight. Negative: unlimited.
	MaxInFlight int
	// MaxInFlightPerTenant bounds one tenant's requests in flight, on
	// every surface (/v1, MCP, E2B). Zero: DefaultMaxInFlightPerTenant.
	// Negative: unlimited.
	MaxInFlightPerTenant int
}

// Defaults of AdmissionConfig. A request in flight includes open streams
// (an E2B command's output, a streamed tool call), so the per-tenant
// default leaves room for a few dozen of them.
const (
	DefaultMaxInFlight          = 1024
	DefaultMaxInFlightPerTenant = 64
)

// retryAfter is the Retry-After (seconds) of a refused request.
const retryAfter = "1"

// Admission is the global admission limit and the per-tenant in-flight
// limit. Both refuse rather than queue: a queue would hold connections
// and memory for callers who can retry. It is safe for concurrent use.
type Admission struct {
	max, perTenant int // <= 0: unlimited

	mu      sync.Mutex
	total   int
	tenants map[string]int
}

// NewAdmission returns an Admission for cfg.
func NewAdmission(cfg AdmissionConfig) *Admission {
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxInFlightPerTenant == 0 {
		cfg.MaxInFlightPerTenant = DefaultMaxInFlightPerTenant
	}
	return &Admission{max: cfg.MaxInFlight, perTenant: cfg.MaxInFlightPerTenant, tenants: map[string]int{}}
}

// Enter admits one request under the global limit; release ends it.
func (a *Admission) Enter() (release func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.max > 0 && a.total >= a.max {
		return nil, fmt.Errorf("the server has %d requests in flight, its limit; retry shortly: %w", a.total, errdefs.ErrResourceExhausted)
	}
	a.total++
	return sync.OnceFunc(func() {
		a.mu.Lock()
		a.total--
		a.mu.Unlock()
	}), nil
}

// Tenant admits one request of an authenticated tenant under its
// in-flight limit; release ends it. It has the signature of
// e2bcompat.Config.Admit.
func (a *Admission) Tenant(_ context.Context, tenantID string) (release func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.tenants[tenantID]
	if a.perTenant > 0 && n >= a.perTenant {
		return nil, fmt.Errorf("tenant has %d requests in flight, its limit; retry shortly: %w", n, errdefs.ErrResourceExhausted)
	}
	a.tenants[tenantID] = n + 1
	return sync.OnceFunc(func() {
		a.mu.Lock()
		if a.tenants[tenantID] <= 1 {
			delete(a.tenants, tenantID)
		} else {
			a.tenants[tenantID]--
		}
		a.mu.Unlock()
	}), nil
}

// exempt reports whether a request skips the global limit: probes and
// scrapes must answer under load.
func exempt(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return r.Method == http.MethodGet
	}
	return false
}

// errBodyTimeout ends a request whose body did not arrive in time.
var errBodyTimeout = errors.New("request body read timed out")

// bodyDeadline bounds the time a request body may take to arrive:
// timeout, plus one second per minRate bytes received, so a large upload
// at a fair pace is never cut while a trickle (slowloris) is. The deadline
// is the connection's read deadline, lifted when the body ends: after that
// the server's background read watches for the client going away, and a
// deadline would cancel long streaming responses.
type bodyDeadline struct {
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

// limitBody arms the deadline on r's body; requests without a body are
// left alone (their background read starts at once).
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	b := &bodyDeadline{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(),
		timeout: s.cfg.BodyReadTimeout, minRate: s.cfg.MinBodyRate}
	b.set = b.start.Add(b.timeout)
	if err := b.rc.SetReadDeadline(b.set); err != nil {
		return // not a net/http connection (tests with a recorder)
	}
	r.Body = b
}

func (b *bodyDeadline) Read(p []byte) (int, error) {
	if b.expired {
		return 0, errBodyTimeout
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
			return n, errBodyTimeout
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

func (b *bodyDeadline) lift() {
	if !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// isBodyTimeout reports whether err (from reading a body) is the body
// deadline, possibly wrapped by a decoder or a category.
func isBodyTimeout(err error) bool { return errors.Is(err, errBodyTimeout) }

// bodyTimeoutError is the 408 answer.
func bodyTimeoutError() api.Error {
	return api.Error{Code: errdefs.CodeDeadlineExceeded, Message: "the request body did not arrive in time"}
}

// identityEncoding reports whether a Content-Encoding leaves the body as
// it is; nothing on /v1 or MCP decodes compressed bodies.
func identityEncoding(enc string) bool {
	enc = strings.TrimSpace(enc)
	return enc == "" || strings.EqualFold(enc, "identity")
}

// requireMetricsToken guards /metrics with Config.MetricsToken.
func (s *Server) requireMetricsToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || s.cfg.MetricsToken == "" || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.cfg.MetricsToken)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandlot-metrics"`)
			writeJSON(w, http.StatusUnauthorized, api.Error{Code: errdefs.CodeUnauthenticated,
				Message: "/metrics needs the metrics token (Authorization: Bearer; DATA/metrics-token)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
