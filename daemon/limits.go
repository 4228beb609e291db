package daemon

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/errdefs"
)

// Defaults of Config.MaxInFlight and MaxInFlightPerTenant. A request in
// flight includes open streams (an E2B command's output, a streamed tool
// call), so the per-tenant default leaves room for a few dozen of them.
const (
	DefaultMaxInFlight          = 1024
	DefaultMaxInFlightPerTenant = 64
)

// admission is the global admission limit and the per-tenant in-flight
// limit of every surface (/v1, MCP, E2B). Both refuse rather than queue: a
// queue would hold connections and memory for callers who can retry. It
// is safe for concurrent use.
type admission struct {
	max, perTenant int // <= 0: unlimited

	mu      sync.Mutex
	total   int
	tenants map[string]int
}

// newAdmission bounds the requests in flight to max, and one tenant's to
// perTenant; zero is the default, negative unlimited.
func newAdmission(max, perTenant int) *admission {
	if max == 0 {
		max = DefaultMaxInFlight
	}
	if perTenant == 0 {
		perTenant = DefaultMaxInFlightPerTenant
	}
	return &admission{max: max, perTenant: perTenant, tenants: map[string]int{}}
}

// enter admits one request under the global limit; release ends it.
func (a *admission) enter() (release func(), err error) {
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

// tenant admits one request of an authenticated tenant under its
// in-flight limit; release ends it. It has the signature of
// server.Config.Admit and e2bcompat.Config.Admit.
func (a *admission) tenant(_ context.Context, tenantID string) (release func(), err error) {
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

// requireMetricsToken guards /metrics with the metrics token: the
// exposition names tenants (quota gauges), so it is never public. An
// empty token refuses everyone.
func requireMetricsToken(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandlot-metrics"`)
			server.WriteJSON(w, http.StatusUnauthorized, api.Error{Code: errdefs.CodeUnauthenticated,
				Message: "/metrics needs the metrics token (Authorization: Bearer; DATA/metrics-token)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// identityOnly refuses a request body in any Content-Encoding but
// identity with 415, in /v1's error shape: nothing behind it (MCP,
// /metrics) decodes compressed bodies, and must not take one as its
// compressed bytes. The /v1 API checks its own routes.
func identityOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if enc := strings.TrimSpace(r.Header.Get("Content-Encoding")); enc != "" && !strings.EqualFold(enc, "identity") {
			server.WriteJSON(w, http.StatusUnsupportedMediaType, api.Error{Code: errdefs.CodeInvalidArgument,
				Message: "Content-Encoding " + r.Header.Get("Content-Encoding") + " is not supported; send the body uncompressed"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// inFlight is how many requests of tenantID are in flight, and its limit
// (<= 0: none).
func (a *admission) inFlight(tenantID string) (n, limit int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tenants[tenantID], a.perTenant
}
