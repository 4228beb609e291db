// Package server is sandlot's HTTP API (/v1): authentication by tenant API
// key, tool calls (plain JSON or streamed NDJSON), contexts, path events,
// files, health and the OpenAPI document.
//
// The server declares the small interfaces it consumes (Contexts, Tools) and
// is wired to the real manager and tool registry by `sandlot serve`. Every
// error leaves through writeError, which maps errdefs categories to HTTP
// once; an uncategorised error is a server fault and is reported as a 500
// without its text.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/tools"
)

// Contexts is the part of *contexts.Manager the server uses; the manager
// satisfies it as it is. Tenant-scoped methods answer errdefs.ErrNotFound
// for another tenant's context, which is how the API hides other tenants'
// contexts (404, never 403).
type Contexts interface {
	Get(ctx context.Context, tenantID, contextID string) (*contexts.Record, error)
	List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error)
	Terminate(ctx context.Context, tenantID, contextID string, reason contexts.Reason) error
	PathEvent(ctx context.Context, id contexts.Identity, ev contexts.PathEvent) error
	EndConversation(ctx context.Context, tenantID, conversationID string) (int, error)
	// Use runs fn with the (guarded) sandbox of id's active context,
	// creating the context when there is none.
	Use(ctx context.Context, id contexts.Identity, opts contexts.CreateOptions, fn func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error) error
	Stats() contexts.Stats
}

var _ Contexts = (*contexts.Manager)(nil)

// Tools is the part of the tool registry the server uses; *tools.Registry
// satisfies it as it is.
type Tools interface {
	// Call runs a tool. out (nil when the caller does not stream)
	// receives guarded output while it runs. An unknown tool is
	// errdefs.ErrNotFound; bad args are errdefs.ErrInvalidArgument.
	Call(ctx context.Context, c tools.Call, out contexts.OutputFunc) (any, error)
	// Export lists the tools' schemas in a format (openai, anthropic,
	// mcp; "" is the registry's own). Unknown formats are
	// errdefs.ErrInvalidArgument.
	Export(format string) (any, error)
}

var _ Tools = (*tools.Registry)(nil)

// Check is a named readiness probe for /readyz.
type Check func(ctx context.Context) error

// Defaults for the zero values of Config.
const (
	DefaultMaxBodyBytes    = 8 << 20
	DefaultMaxUploadBytes  = 256 << 20
	DefaultShutdownTimeout = 30 * time.Second
	DefaultBodyReadTimeout = 30 * time.Second
	DefaultMinBodyRate     = 32 << 10
)

// Config configures a Server. Contexts, Tools and Auth are required.
type Config struct {
	Contexts Contexts
	Tools    Tools
	// Auth resolves API keys (a *tenant.Authenticator shared with the
	// other edges, so one key cache serves them all).
	Auth Authenticator
	// Logger receives one line per request and every server fault;
	// nil discards.
	Logger *slog.Logger
	// MaxBodyBytes bounds JSON request bodies (0: 8 MiB); more is a 413.
	MaxBodyBytes int64
	// MaxUploadBytes bounds one file upload (0: 256 MiB); more is a 413.
	MaxUploadBytes int64
	// Ready holds the probes of /readyz by name ("store", "runtime").
	Ready map[string]Check
	// ShutdownTimeout bounds how long Serve waits for in-flight requests
	// after its context ends (0: 30 s).
	ShutdownTimeout time.Duration
	// MCP, when set, is mounted at /mcp behind the same API-key auth.
	MCP http.Handler
	// E2B, when set, gets every request E2BMatch accepts, before routing
	// and without sandlot's auth (the E2B wire authenticates itself).
	E2B      http.Handler
	E2BMatch func(r *http.Request) bool
	// Ports, when set, gets every request PortsMatch accepts (a sandbox's
	// port by host name or path, network/ports), first: it authenticates
	// by traffic token itself, streams both ways (WebSocket), and is not
	// bounded by the API's body limits or admission.
	Ports      http.Handler
	PortsMatch func(r *http.Request) bool
	// Secrets, when set, keeps tenants' secrets (/v1/secrets); nil answers
	// those routes 412. SecretsChanged is told of every change, by tenant.
	Secrets        secret.Store
	SecretsChanged func(tenantID string)
	// Templates, when set, serves /v1/templates (list, get, delete, pull
	// and import for the request's tenant); nil answers those routes 412.
	Templates Templates
	// Builds, when set, serves /v1/templates/builds (the daemon's build
	// queue, shared with the E2B wire); nil answers those routes 412.
	Builds Builds
	// MaxImportBytes bounds an image tarball uploaded to POST
	// /v1/templates (0: 4 GiB); more is a 413.
	MaxImportBytes int64
	// Metrics, when set, is mounted at GET /metrics behind
	// MetricsToken.
	Metrics http.Handler
	// MetricsToken is the bearer token /metrics requires
	// ("Authorization: Bearer <token>"): the exposition names tenants
	// (quota gauges), so it is never public. Empty: /metrics answers 401
	// to everyone.
	MetricsToken string
	// Admission bounds the requests in flight, in all and per tenant;
	// both answer 429 with Retry-After when full. Nil: NewAdmission with
	// its defaults. Share it with the E2B handler (e2bcompat.Config.Admit)
	// so one tenant's limit covers every surface.
	Admission *Admission
	// BodyReadTimeout bounds reading a request body: it must arrive within
	// this time plus one second per MinBodyRate bytes, or the request ends
	// with 408. Streaming responses are not affected: the deadline is
	// lifted once the body has been read. Zero: DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// MinBodyRate is the slowest body transfer (bytes per second) a large
	// upload may keep up past BodyReadTimeout. Zero: DefaultMinBodyRate.
	MinBodyRate int64
	// E2BError, when set, writes errors of requests E2BMatch accepts that
	// the server refuses before the E2B handler sees them (admission), in
	// the E2B wire's shapes.
	E2BError func(w http.ResponseWriter, r *http.Request, err error)
	// Audit, when set, lists a tenant's audit trail, newest first, for
	// GET /v1/audit (store.Backend.ListAudit); without it the route
	// answers 503.
	Audit func(ctx context.Context, tenantID string, limit int) ([]audit.Event, error)
	// GuardText passes text a sandbox chose, that is not otherwise its
	// output (the names and errors in its audit events), through the
	// egress guard as output of the tenant's context contextID ("" when
	// none). Nil passes it unchanged (tests only).
	GuardText func(ctx context.Context, tenantID, contextID, text string) string
}

// Server is the HTTP API. Its methods are safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	draining atomic.Bool
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxImportBytes <= 0 {
		cfg.MaxImportBytes = DefaultMaxImportBytes
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.Admission == nil {
		cfg.Admission = NewAdmission(AdmissionConfig{})
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.MinBodyRate <= 0 {
		cfg.MinBodyRate = DefaultMinBodyRate
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	for _, rt := range s.routes() {
		h := http.Handler(rt.h)
		if rt.auth {
			h = s.requireKey(h)
		}
		s.mux.Handle(rt.method+" "+rt.path, h)
	}
	if cfg.MCP != nil {
		s.mux.Handle("/mcp", s.requireKey(cfg.MCP))
		s.mux.Handle("/mcp/", s.requireKey(cfg.MCP))
	}
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", s.requireMetricsToken(cfg.Metrics))
	}
	return s
}

// route is one documented JSON route. routes() is the single list that is
// both registered and checked against the OpenAPI document.
type route struct {
	method, path string
	auth         bool
	h            http.HandlerFunc
}

func (s *Server) routes() []route {
	return []route{
		{"GET", "/healthz", false, s.healthz},
		{"GET", "/readyz", false, s.readyz},
		{"GET", "/v1/openapi.json", false, s.openapi},
		{"GET", "/v1/tools", true, s.listTools},
		{"POST", "/v1/tools/{name}", true, s.callTool},
		{"GET", "/v1/contexts", true, s.listContexts},
		{"GET", "/v1/contexts/{id}", true, s.getContext},
		{"DELETE", "/v1/contexts/{id}", true, s.deleteContext},
		{"PUT", "/v1/contexts/{id}/files", true, s.upload},
		{"GET", "/v1/contexts/{id}/files", true, s.download},
		{"GET", "/v1/contexts/{id}/files/list", true, s.listFiles},
		{"DELETE", "/v1/conversations/{conversationId}", true, s.endConversation},
		{"POST", "/v1/conversations/{conversationId}/paths/{pathId}/events", true, s.pathEvent},
		{"PUT", "/v1/conversations/{conversationId}/paths/{pathId}/files", true, s.upload},
		{"GET", "/v1/conversations/{conversationId}/paths/{pathId}/files", true, s.download},
		{"GET", "/v1/conversations/{conversationId}/paths/{pathId}/files/list", true, s.listFiles},
		{"GET", "/v1/metrics/sessions", true, s.sessionMetrics},
		{"GET", "/v1/audit", true, s.listAudit},
		{"GET", "/v1/secrets", true, s.listSecrets},
		{"PUT", "/v1/secrets/{name}", true, s.putSecret},
		{"DELETE", "/v1/secrets/{name}", true, s.deleteSecret},
		{"GET", "/v1/templates", true, s.listTemplates},
		{"POST", "/v1/templates", true, s.createTemplate},
		{"GET", "/v1/templates/{nameOrId}", true, s.getTemplate},
		{"DELETE", "/v1/templates/{nameOrId}", true, s.deleteTemplate},
		{"POST", "/v1/templates/builds", true, s.buildTemplate},
		{"GET", "/v1/templates/builds/{buildId}", true, s.buildStatus},
	}
}

// Handler returns the server's root handler: request ids, logging, panic
// recovery, the E2B matcher, then the routes.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting, lets in-flight requests (executions, streams) finish for up to
// Config.ShutdownTimeout, and then closes what is left. It returns nil after
// a shutdown caused by ctx. The caller closes the manager afterwards.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
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
	s.draining.Store(true)
	s.log.Info("shutting down", slog.String("timeout", s.cfg.ShutdownTimeout.String()))
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("shutdown deadline passed; closing open connections", slog.String(logkey.Err, err.Error()))
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

type logKey struct{}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
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
			s.log.Error("panic", slog.String(logkey.RequestID, rid), slog.Any(logkey.Err, v))
			if lw.status == 0 {
				s.writeError(lw, r, fmt.Errorf("panic: %v", v))
			}
		}
		status := lw.status
		if status == 0 {
			status = http.StatusOK
		}
		level := slog.LevelInfo
		if status >= 500 && route != "ports" { // a closed port in a sandbox is not the server's fault
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
		s.log.LogAttrs(r.Context(), level, "request",
			slog.String(logkey.RequestID, rid), slog.String(logkey.Method, r.Method),
			slog.String(logkey.Route, route), slog.Int(logkey.Status, status),
			slog.Float64(logkey.Duration, float64(time.Since(start).Microseconds())/1000),
			slog.String(logkey.Tenant, lw.tenant), slog.Int64(logkey.Bytes, lw.bytes))
	}()
	if s.cfg.Ports != nil && s.cfg.PortsMatch != nil && s.cfg.PortsMatch(r) {
		route = "ports"
		s.cfg.Ports.ServeHTTP(lw, r)
		return
	}
	s.limitBody(w, r)
	isE2B := s.cfg.E2B != nil && s.cfg.E2BMatch != nil && s.cfg.E2BMatch(r)
	if !exempt(r) {
		release, err := s.cfg.Admission.Enter()
		if err != nil {
			if isE2B && s.cfg.E2BError != nil {
				lw.Header().Set("Retry-After", retryAfter)
				s.cfg.E2BError(lw, r, err)
			} else {
				s.writeError(lw, r, err)
			}
			return
		}
		defer release()
	}
	if isE2B {
		s.cfg.E2B.ServeHTTP(lw, r)
		return
	}
	if enc := r.Header.Get("Content-Encoding"); !identityEncoding(enc) && !(buildRoute(r) && gzipEncoding(enc)) {
		writeJSON(lw, http.StatusUnsupportedMediaType, api.Error{Code: errdefs.CodeInvalidArgument,
			Message: "Content-Encoding " + r.Header.Get("Content-Encoding") + " is not supported; send the body uncompressed"})
		return
	}
	_, pattern := s.mux.Handler(r)
	if pattern == "" {
		route = "none"
		s.noRoute(lw, r)
		return
	}
	route = pattern
	s.mux.ServeHTTP(lw, r)
}

// noRoute answers an unrouted request with the mux's status (404, or 405
// with Allow) in the JSON error shape.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	rec := &statusOnly{header: http.Header{}}
	s.mux.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	code := rec.status
	if code == 0 || code == http.StatusOK {
		code = http.StatusNotFound
	}
	apiErr := api.Error{Code: errdefs.CodeNotFound, Message: "no route for " + r.Method + " " + r.URL.Path}
	if code == http.StatusMethodNotAllowed {
		apiErr = api.Error{Code: errdefs.CodeInvalidArgument, Message: "method " + r.Method + " not allowed on " + r.URL.Path}
	}
	writeJSON(w, code, apiErr)
}

type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}

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
	return newID()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":"internal","message":"internal error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", api.ContentTypeJSON)
	h.Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(status)
	b = append(b, '\n')
	_, _ = w.Write(b)
}

var _ io.Writer = (*logWriter)(nil)
