package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/console"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/internal/slowbody"
	"github.com/sandlot/sandlot/landing"
	"github.com/sandlot/sandlot/telemetry"
)

// Defaults of the front door's zero values.
const (
	DefaultShutdownTimeout = 30 * time.Second
	defaultBodyReadTimeout = 30 * time.Second
	defaultMinBodyRate     = 32 << 10 // bytes per second
)

// surface is a handler that claims its requests itself: the E2B wire (its
// hosts and headers), a sandbox's port (by host name or path).
type surface interface {
	http.Handler
	Match(r *http.Request) bool
}

// frontConfig is what the front door serves.
type frontConfig struct {
	// V1 is the /v1 API's configuration; the front door sets its Admit
	// (and its Logger, when nil).
	V1 server.Config
	// MCP, when set, is mounted at /mcp behind /v1's API-key check.
	MCP http.Handler
	// E2B, when set, gets every request it matches, before /mcp, /metrics
	// and /v1 and without their auth (the E2B wire authenticates
	// itself); E2BError writes the refusals of the front door (admission)
	// in its shapes.
	E2B      surface
	E2BError func(w http.ResponseWriter, r *http.Request, err error)
	// Ports, when set, gets every request it matches, first: it
	// authenticates by traffic token itself, streams both ways
	// (WebSocket), and is bounded by neither the body deadline nor
	// admission.
	Ports surface
	// Metrics, when set, is mounted at GET /metrics behind MetricsToken
	// ("Authorization: Bearer <token>"); an empty token refuses everyone.
	Metrics      http.Handler
	MetricsToken string
	// Admission bounds the requests in flight on every surface; nil:
	// newAdmission's defaults. The E2B wire is given its tenant limit too.
	Admission *admission
	// BodyReadTimeout and MinBodyRate bound a request body's arrival
	// (slowbody); zero: 30 s and 32 KiB/s.
	BodyReadTimeout time.Duration
	MinBodyRate     int64
	// ShutdownTimeout bounds Serve's wait for requests in flight after
	// its context ends; zero: DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	// Version is shown by the landing page at / ("": devel).
	Version string
	// Console, when set, serves the web console at /ui and under it
	// (package console); the landing page links it.
	Console http.Handler
}

// frontDoor is sandlot's one HTTP front door. Every request gets a request
// id, a server span in the caller's trace, one access-log line and panic
// recovery; then ServeHTTP dispatches it, in this one place: a sandbox's
// port; else, under the body deadline and the admission limit, the E2B
// wire; the console at /ui; the landing page at GET /; MCP at /mcp;
// /metrics; and the /v1 API for everything else.
type frontDoor struct {
	cfg          frontConfig
	log          *slog.Logger
	v1           *server.Server
	landing      http.Handler   // GET and HEAD /
	mux          *http.ServeMux // /mcp and /metrics
	metricsToken string
}

// newFrontDoor returns the front door over cfg.
func newFrontDoor(cfg frontConfig) *frontDoor {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Admission == nil {
		cfg.Admission = newAdmission(0, 0)
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = defaultBodyReadTimeout
	}
	if cfg.MinBodyRate <= 0 {
		cfg.MinBodyRate = defaultMinBodyRate
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	f := &frontDoor{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), metricsToken: cfg.MetricsToken}
	v1 := cfg.V1
	v1.Admit = f.admitTenant
	if v1.Logger == nil {
		v1.Logger = f.log
	}
	f.v1 = server.New(v1)
	lc := landing.Config{Version: cfg.Version, Readiness: f.v1.Readiness}
	if cfg.Console != nil {
		lc.Console = console.Path
	}
	f.landing = landing.New(lc)
	if cfg.MCP != nil {
		h := identityOnly(f.v1.RequireKey(cfg.MCP))
		f.mux.Handle("/mcp", h)
		f.mux.Handle("/mcp/", h)
	}
	if cfg.Metrics != nil {
		f.mux.Handle("GET /metrics", identityOnly(requireMetricsToken(cfg.MetricsToken, cfg.Metrics)))
		// Another method gets /v1's 405, as for any route.
		f.mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			server.WriteJSON(w, http.StatusMethodNotAllowed, api.Error{Code: errdefs.CodeInvalidArgument,
				Message: "method " + r.Method + " not allowed on " + r.URL.Path})
		})
	}
	return f
}

// admitTenant is /v1's Admit (and so MCP's): the tenant's in-flight
// limit, shared with the E2B wire, after noting the tenant for the access
// log.
func (f *frontDoor) admitTenant(ctx context.Context, tenantID string) (func(), error) {
	if lw, ok := ctx.Value(logKey{}).(*logWriter); ok {
		lw.tenant = tenantID
	}
	return f.cfg.Admission.tenant(ctx, tenantID)
}

type logKey struct{}

func (f *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rid := requestID(r.Header.Get(api.HeaderRequestID))
	w.Header().Set(api.HeaderRequestID, rid)
	lw := &logWriter{ResponseWriter: w}
	// Join the caller's trace (W3C traceparent) so the execution_context.*
	// and tool.* spans below hang off the client's span.
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := telemetry.Tracer().Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
	r = r.WithContext(context.WithValue(ctx, logKey{}, lw))
	route := "e2b"
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			f.log.Error("panic", slog.String(logkey.RequestID, rid), slog.Any(logkey.Err, v))
			if lw.status == 0 {
				f.v1.WriteError(lw, r, fmt.Errorf("panic: %v", v))
			}
		}
		f.logRequest(r, lw, span, route, rid, start)
	}()
	if f.cfg.Ports != nil && f.cfg.Ports.Match(r) {
		route = "ports"
		f.cfg.Ports.ServeHTTP(lw, r)
		return
	}
	// The surfaces log their faults and states under the request's id.
	r.Header.Set(api.HeaderRequestID, rid)
	slowbody.Arm(w, r, f.cfg.BodyReadTimeout, f.cfg.MinBodyRate)
	isE2B := f.cfg.E2B != nil && f.cfg.E2B.Match(r)
	if !exempt(r) {
		release, err := f.cfg.Admission.enter()
		if err != nil {
			if isE2B && f.cfg.E2BError != nil {
				lw.Header().Set("Retry-After", server.RetryAfter)
				f.cfg.E2BError(lw, r, err)
			} else {
				f.v1.WriteError(lw, r, err)
			}
			return
		}
		defer release()
	}
	if isE2B {
		f.cfg.E2B.ServeHTTP(lw, r)
		return
	}
	if f.cfg.Console != nil && console.Match(r) {
		route = "console"
		f.cfg.Console.ServeHTTP(lw, r)
		return
	}
	if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		route = "landing"
		f.landing.ServeHTTP(lw, r)
		return
	}
	if h, pattern := f.mux.Handler(r); pattern != "" {
		route = pattern
		h.ServeHTTP(lw, r)
		return
	}
	if route = f.v1.Route(r); route == "" {
		route = "none"
	}
	f.v1.ServeHTTP(lw, r)
}

// logRequest ends the request's span, named after its route, and writes
// its access-log line.
func (f *frontDoor) logRequest(r *http.Request, lw *logWriter, span trace.Span, route, rid string, start time.Time) {
	status := lw.status
	if status == 0 {
		status = http.StatusOK
	}
	level := slog.LevelInfo
	// A closed port in a sandbox is not the server's fault, and neither is
	// a 503 that says when to come back (Retry-After: a template being
	// built, the admission limit).
	if status >= 500 && route != "ports" && !(status == http.StatusServiceUnavailable && lw.Header().Get("Retry-After") != "") {
		level = slog.LevelError
	}
	// Mux patterns carry their method ("GET /v1/contexts").
	path := route
	if _, p, ok := strings.Cut(route, " "); ok {
		path = p
	}
	span.SetName(r.Method + " " + path)
	span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", path),
		attribute.Int("http.response.status_code", status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
	f.log.LogAttrs(r.Context(), level, "request",
		slog.String(logkey.RequestID, rid), slog.String(logkey.Method, r.Method),
		slog.String(logkey.Route, route), slog.Int(logkey.Status, status),
		slog.Float64(logkey.Duration, float64(time.Since(start).Microseconds())/1000),
		slog.String(logkey.Tenant, lw.tenant), slog.Int64(logkey.Bytes, lw.bytes))
}

// serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting, marks /readyz unavailable, lets requests in flight finish for
// up to ShutdownTimeout, and then closes what is left. It returns nil after
// a shutdown caused by ctx.
func (f *frontDoor) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           f,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(f.log.Handler(), slog.LevelDebug),
		// Requests outlive ctx on purpose: shutdown lets them finish.
		BaseContext: func(net.Listener) context.Context { return context.Background() },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	f.v1.Drain()
	f.log.Info("shutting down", slog.String("timeout", f.cfg.ShutdownTimeout.String()))
	sctx, cancel := context.WithTimeout(context.Background(), f.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		f.log.Warn("shutdown deadline passed; closing open connections", slog.String(logkey.Err, err.Error()))
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// logWriter records what the handler wrote, for the access log. It keeps
// Flush and Unwrap so streaming and http.ResponseController work through it.
type logWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	tenant string
}

func (w *logWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *logWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *logWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *logWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestID keeps a caller's request id when it is short and printable,
// else makes one.
func requestID(in string) string {
	if in != "" && len(in) <= 128 {
		ok := true
		for i := 0; i < len(in); i++ {
			if in[i] < 0x21 || in[i] > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return in
		}
	}
	return uuid.NewString()
}
