// Package server is sandlot's HTTP API, /v1: authentication by tenant API
// key, tool calls (plain JSON or streamed NDJSON), contexts, path events,
// files, secrets, templates and builds, audit, health and the OpenAPI
// document.
//
// The server declares the small interfaces it consumes (Contexts, Tools)
// and serves /v1 only: the daemon's front door (package daemon) puts it
// behind request ids, spans, access logs, panic recovery, body deadlines
// and admission, beside the other surfaces. Every error leaves through
// writeError, which maps errdefs categories to HTTP once; an
// uncategorised error is a server fault and is reported as a 500 without
// its text.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/tenant"
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
	// Suspend suspends a context to disk (docs/state.md); keep 0 keeps
	// its expiry.
	Suspend(ctx context.Context, tenantID, contextID string, keep time.Duration) (*contexts.Record, error)
	PathEvent(ctx context.Context, id contexts.Identity, ev contexts.PathEvent) error
	EndConversation(ctx context.Context, tenantID, userID, conversationID string) (int, error)
	// Use runs fn with the (guarded) sandbox of id's active context,
	// creating the context when there is none.
	Use(ctx context.Context, id contexts.Identity, opts contexts.CreateOptions, fn func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error) error
	// Stats counts every tenant's contexts, TenantStats one tenant's.
	Stats() contexts.Stats
	TenantStats(tenantID string) contexts.Stats
}

var _ Contexts = (*contexts.Manager)(nil)

// Tools is the part of the tool registry the server uses; *tools.Registry
// satisfies it as it is.
type Tools interface {
	// Call runs a tool. out (nil when the caller does not stream)
	// receives guarded output while it runs. An unknown tool is
	// errdefs.ErrNotFound; bad args are errdefs.ErrInvalidArgument.
	Call(ctx context.Context, c tools.Call, out contexts.OutputFunc) (any, error)
	// ExportFor lists the schemas of the tools offered to a caller's
	// request ("" none) in a format (openai, anthropic, mcp; "" is the
	// registry's own). Unknown formats are errdefs.ErrInvalidArgument.
	ExportFor(format, request string) (any, error)
}

var _ Tools = (*tools.Registry)(nil)

// Check is a named readiness probe for /readyz.
type Check func(ctx context.Context) error

// Defaults for the zero values of Config.
const (
	DefaultMaxBodyBytes   = 8 << 20
	DefaultMaxUploadBytes = 256 << 20
)

// Config configures a Server. Contexts, Tools and Auth are required.
type Config struct {
	Contexts Contexts
	Tools    Tools
	// Auth resolves API keys (a *tenant.Authenticator shared with the
	// other surfaces, so one key cache serves them all).
	Auth Authenticator
	// Admit, when set, admits each authenticated request of a tenant
	// (the front door's per-tenant in-flight limit, which the other
	// surfaces share); an error refuses it (429 with Retry-After for
	// resource_exhausted), release ends it. Nil admits every request.
	Admit func(ctx context.Context, tenantID string) (release func(), err error)
	// Logger receives every server fault; nil discards.
	Logger *slog.Logger
	// MaxBodyBytes bounds JSON request bodies (0: 8 MiB); more is a 413.
	MaxBodyBytes int64
	// MaxUploadBytes bounds one file upload (0: 256 MiB); more is a 413.
	MaxUploadBytes int64
	// MaxImportBytes bounds an image tarball uploaded to POST
	// /v1/templates (0: 4 GiB); more is a 413.
	MaxImportBytes int64
	// Ready holds the probes of /readyz by name ("store", "runtime").
	Ready map[string]Check
	// Progress, when set, adds the daemon's work under way to /readyz's
	// body (template builds): a Waiting entry makes it answer 503.
	Progress func(*api.Readiness)
	// Secrets, when set, keeps tenants' secrets (/v1/secrets); nil answers
	// those routes 412. SecretsChanged is told of every change, by tenant.
	Secrets        secret.Store
	SecretsChanged func(tenantID string)
	// Templates, when set, serves /v1/templates (list, get, delete, pull
	// and import for the request's tenant); nil answers those routes 412.
	Templates Templates
	// Snapshots and Capture, both set, serve /v1/snapshots and POST
	// /v1/contexts/{id}/snapshots (snapshots.go: the catalog and the
	// manager's Capture); else those routes answer 412.
	Snapshots Snapshots
	Capture   func(ctx context.Context, tenantID, contextID string, w io.Writer, max int64) error
	// Builds, when set, serves /v1/templates/builds (the daemon's build
	// queue, shared with the E2B wire); nil answers those routes 412.
	Builds Builds
	// Volumes, when set, serves /v1/volumes (volumes.go); nil answers
	// those routes 412.
	Volumes Volumes
	// Audit, when set, lists a tenant's audit trail, newest first, for
	// GET /v1/audit (store.Backend.ListAudit); without it the route
	// answers 503.
	Audit func(ctx context.Context, tenantID, kind string, limit int) ([]audit.Event, error)
	// GuardText passes text a sandbox chose, that is not otherwise its
	// output (the names and errors in its audit events), through the
	// egress guard as output of the tenant's context contextID ("" when
	// none). Nil passes it unchanged (tests only).
	GuardText func(ctx context.Context, tenantID, contextID, text string) string
	// Live, when set, serves the live feed of contexts (GET
	// /v1/contexts/events) and PUT /v1/contexts/{id}/ttl; nil answers
	// them 503.
	Live Live
	// Keys, when set, serves /v1/keys, the tenant's own API keys
	// (keys.go; the store); nil answers those routes 412. AuditAdd, when
	// set, is told of each key made and revoked (the daemon's batched
	// audit writer).
	Keys     tenant.Keys
	AuditAdd func(ev audit.Event)
	// Usage, when set, answers GET /v1/usage: the tenant's quotas and
	// its use of each (the daemon's, which knows the limits); nil answers
	// 412.
	Usage func(ctx context.Context, tenantID string) ([]api.Quota, error)
	// Version is the body of GET /v1/version (the daemon's build:
	// daemon.BuildVersion). Public like the landing page, which shows it
	// too: it names no tenant, path or host.
	Version api.Version
}

// Server is the HTTP API. Its methods are safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	draining atomic.Bool
	// drained is closed by Drain: long-lived streams (the live feed) end.
	drained   chan struct{}
	drainOnce sync.Once
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
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), drained: make(chan struct{})}
	for _, rt := range s.routes() {
		h := http.Handler(rt.h)
		if rt.auth {
			h = s.RequireKey(h)
		}
		s.mux.Handle(rt.method+" "+rt.path, h)
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
		{"GET", "/v1/version", false, s.version},
		{"GET", "/v1/tenant", true, s.whoami},
		{"GET", "/v1/keys", true, s.listKeys},
		{"POST", "/v1/keys", true, s.createKey},
		{"DELETE", "/v1/keys/{id}", true, s.revokeKey},
		{"GET", "/v1/usage", true, s.usage},
		{"GET", "/v1/tools", true, s.listTools},
		{"POST", "/v1/tools/{name}", true, s.callTool},
		{"GET", "/v1/contexts", true, s.listContexts},
		{"GET", "/v1/contexts/events", true, s.contextEvents},
		{"GET", "/v1/contexts/{id}", true, s.getContext},
		{"PUT", "/v1/contexts/{id}/ttl", true, s.setTTL},
		{"DELETE", "/v1/contexts/{id}", true, s.deleteContext},
		{"POST", "/v1/contexts/{id}/suspend", true, s.suspendContext},
		{"PUT", "/v1/contexts/{id}/files", true, s.upload},
		{"GET", "/v1/contexts/{id}/files", true, s.download},
		{"GET", "/v1/contexts/{id}/files/list", true, s.listFiles},
		{"GET", "/v1/contexts/{id}/shell", true, s.shell},
		{"DELETE", "/v1/conversations/{conversationId}", true, s.endConversation},
		{"POST", "/v1/conversations/{conversationId}/paths/{pathId}/events", true, s.pathEvent},
		{"PUT", "/v1/conversations/{conversationId}/paths/{pathId}/files", true, s.upload},
		{"GET", "/v1/conversations/{conversationId}/paths/{pathId}/files", true, s.download},
		{"GET", "/v1/conversations/{conversationId}/paths/{pathId}/files/list", true, s.listFiles},
		{"GET", "/v1/conversations/{conversationId}/paths/{pathId}/shell", true, s.shell},
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
		{"GET", "/v1/volumes", true, s.listVolumes},
		{"POST", "/v1/volumes", true, s.createVolume},
		{"GET", "/v1/volumes/{nameOrId}", true, s.getVolume},
		{"DELETE", "/v1/volumes/{nameOrId}", true, s.deleteVolume},
		{"POST", "/v1/contexts/{id}/snapshots", true, s.createSnapshot},
		{"POST", "/v1/contexts/{id}/fork", true, s.fork},
		{"GET", "/v1/snapshots", true, s.listSnapshots},
		{"DELETE", "/v1/snapshots/{id}", true, s.deleteSnapshot},
	}
}

// Handler returns the server's root handler (the server itself).
func (s *Server) Handler() http.Handler { return s }

// ServeHTTP serves /v1: a body in another Content-Encoding than identity
// is refused with 415 (a template build's context may be gzip), then the
// routes answer, and a request no route takes gets the JSON error of the
// mux's status (404, or 405 with Allow).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if enc := r.Header.Get("Content-Encoding"); !identityEncoding(enc) && !(buildRoute(r) && gzipEncoding(enc)) {
		writeJSON(w, http.StatusUnsupportedMediaType, api.Error{Code: errdefs.CodeInvalidArgument,
			Message: "Content-Encoding " + r.Header.Get("Content-Encoding") + " is not supported; send the body uncompressed"})
		return
	}
	if s.Route(r) == "" {
		s.noRoute(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Route is the route pattern that serves r ("GET /v1/contexts/{id}"), or
// "" when none does: the front door names spans and log lines after it.
func (s *Server) Route(r *http.Request) string {
	_, pattern := s.mux.Handler(r)
	return pattern
}

// Drain makes /readyz answer unavailable ("shutting down") from now on:
// the front door calls it when its graceful shutdown begins.
func (s *Server) Drain() {
	s.draining.Store(true)
	s.drainOnce.Do(func() { close(s.drained) })
}

// WriteError writes err as the /v1 JSON error (writeError): the front
// door's answer to requests it refuses or that panicked, outside the E2B
// wire.
func (s *Server) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeError(w, r, err)
}

// WriteJSON writes v as a JSON body with status, in /v1's framing.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// identityEncoding reports whether a Content-Encoding leaves the body as
// it is; nothing on /v1 decodes compressed bodies but a build's context.
func identityEncoding(enc string) bool {
	enc = strings.TrimSpace(enc)
	return enc == "" || strings.EqualFold(enc, "identity")
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

// writeJSON writes v and a newline. "<", ">" and "&" stay as they are
// (no HTML escaping): messages such as "timeout must be <= 600000" are
// read by people and models, not put in a page.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"code":"internal","message":"internal error"}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", api.ContentTypeJSON)
	h.Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
