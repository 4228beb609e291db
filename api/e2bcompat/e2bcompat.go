// Package e2bcompat makes sandlot speak E2B: the control plane (/sandboxes,
// /v2/sandboxes), envd (Connect RPC process and filesystem services plus
// /files and /health, port header 49983) and the code interpreter (/execute
// and /contexts, port header 49999), so that unchanged programs using the
// official E2B SDKs run against sandlot with only E2B_API_KEY, E2B_API_URL
// and E2B_SANDBOX_URL set.
//
// An E2B sandbox is an execution context of the API key's tenant, and its
// sandboxID is the context id. Every sandbox call goes through the
// Manager's guarded Use and Execute, so the egress guard applies here as on
// every other edge. docs/e2b.md records the mapping decisions.
//
// This package is the facade the daemon calls: it routes each request to
// the surface that serves it, control (control plane), envd or interp
// (code interpreter), after core has found the sandbox a sandbox call's
// credentials open. Each surface keeps its own state of a sandbox, and
// lets go of it when the manager ends the sandbox's context.
package e2bcompat

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat/control"
	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/api/e2bcompat/envd"
	"github.com/sandlot/sandlot/api/e2bcompat/interp"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// EnvdVersion is the envd version sandlot reports (core.EnvdVersion).
const EnvdVersion = core.EnvdVersion

// ClientID is reported as the sandbox's clientID.
const ClientID = core.ClientID

// The types of Config's fields, declared where they are used.
type (
	// Manager is what the E2B surface needs from contexts.Manager.
	Manager = core.Manager
	// Tenants resolves the credentials of E2B calls.
	Tenants = core.Tenants
	// Catalog is the templates the E2B routes see.
	Catalog = control.Catalog
	// Builds is the daemon's build queue, shared with /v1's build route.
	Builds = control.Builds
	// Volumes is the daemon's volumes.
	Volumes = control.Volumes
)

// Config configures the handler. Manager and Tenants are required.
type Config struct {
	Manager Manager
	Tenants Tenants
	// Secret signs access tokens (HMAC-SHA256). Empty: a random secret
	// per process, so tokens die with the process; the server should pass
	// a persistent one.
	Secret []byte
	// TokenTTL is how long an access token is valid after it is issued
	// (create, connect, getInfo issue fresh ones). Zero: DefaultTokenTTL.
	TokenTTL time.Duration
	// MaxTimeout bounds the sandbox timeout a caller may ask for (create,
	// setTimeout, connect, refreshes); more is a 400, as on E2B. Zero:
	// DefaultMaxTimeout.
	MaxTimeout time.Duration
	// PausedTimeout is how long a sandbox may stay paused before it is
	// killed (E2B keeps paused sandboxes until they are killed; sandlot's
	// keep their memory, so it bounds them). Zero: DefaultPausedTimeout.
	PausedTimeout time.Duration
	// Admit, when set, admits one request of a tenant once it is
	// authenticated (the per-tenant in-flight limit); the request calls
	// release when it ends. An error (resource_exhausted) answers 429.
	Admit func(ctx context.Context, tenantID string) (release func(), err error)
	// Clock returns the time; nil: time.Now. Tests move it to expire tokens.
	Clock func() time.Time
	// PlainPython runs the code interpreter's python cells in the plain
	// python kernel (a subset of IPython's syntax, no import on the first
	// cell). false: through IPython, as E2B's code interpreter does
	// (ExecuteRequest.IPython).
	PlainPython bool
	// Templates maps E2B template names to sandlot templates. Names not in
	// the map pass through unchanged. Nil: DefaultTemplates.
	Templates map[string]string
	// DefaultTimeout is the sandbox TTL when a create request names none
	// (the JS SDK since 2.51 leaves it out unless the caller sets one).
	// Zero: DefaultSandboxTimeout.
	DefaultTimeout time.Duration
	// MaxMessageBytes bounds one envd Connect message, after
	// decompression (a larger one is resource_exhausted). Zero:
	// DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// Domain, when set, is the domain of sandbox ports the daemon serves
	// (<port>-<sandboxId>.<domain>, network/ports): create, connect and
	// getInfo return it, so the SDKs' getHost names it. Empty: none.
	Domain string
	// DefaultOpen, when set, tells whether a tenant's creates get E2B's
	// network defaults (the operator's --e2b-internet, for tenants whose
	// cap allows mode open and public ports): one that names neither
	// allow_internet_access nor network gets the open internet and
	// public ports, and a network without allowPublicTraffic public
	// ports. Nil or false: sandlot's defaults, no network and private
	// ports (docs/network.md).
	DefaultOpen func(tenantID string) bool
	// MaxUploadBytes bounds one POST /files body, after decompression
	// when it is gzip (a larger one is resource_exhausted and the partial
	// file is removed). Zero: DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// Catalog, when set, holds the tenants' templates: E2B's template
	// list, get, delete and alias routes answer from it, and builds
	// record into it (control/templatelist.go). Nil: those routes answer
	// failed_precondition (aliases: only Templates' names exist).
	Catalog Catalog
	// Builds, when set, serves E2B's template builds (control/templates.go),
	// recording into its own catalog (the daemon's, Catalog's); nil: those
	// routes answer failed_precondition.
	Builds *Builds
	// Volumes, when set, serves E2B's volumes (control/volumes.go: create,
	// list, get, delete; volumeMounts on create); nil: those answer
	// failed_precondition.
	Volumes Volumes
	// Logger; nil discards.
	Logger *slog.Logger
}

// Defaults of Config. E2B's own sandbox timeout cap is 24 h on its Pro
// plan (1 h on Hobby); sandlot takes the larger, so programs written for
// either keep working, and a token lives as long as the longest timeout.
const (
	DefaultTokenTTL   = 24 * time.Hour
	DefaultMaxTimeout = 24 * time.Hour
	// DefaultSandboxTimeout is E2B's sandbox timeout when a create names
	// none (5 minutes, the SDKs' documented default): a program that never
	// sets one sees its sandbox end, and connect({timeoutMs}) extend it, as
	// on E2B.
	DefaultSandboxTimeout = 5 * time.Minute
	// DefaultPausedTimeout is Config.PausedTimeout's default.
	DefaultPausedTimeout = 7 * 24 * time.Hour
)

// DefaultMaxMessageBytes is Config.MaxMessageBytes's default. envd's
// messages are small (paths, argv, stdin chunks); files travel over /files.
const DefaultMaxMessageBytes = 8 << 20

// DefaultMaxUploadBytes is Config.MaxUploadBytes's default.
const DefaultMaxUploadBytes = 256 << 20

// DefaultTemplates maps E2B's default template names to sandlot's
// templates: base and code-interpreter-v1 (the SDKs' default) to the
// default template (python, node and bash kernels; small and built at the
// daemon's start), code-interpreter to the template of that name, which
// adds R and Java (built when first asked for). docs/e2b-interpreter.md says why.
var DefaultTemplates = map[string]string{
	"base":                    "",
	"code-interpreter-v1":     "",
	templates.CodeInterpreter: templates.CodeInterpreter,
}

// Handler serves the E2B wire. It is safe for concurrent use.
type Handler struct {
	cfg     Config
	edge    *core.Edge
	control *control.Handler
	envd    *envd.Handler
	interp  *interp.Handler
}

// New returns the E2B handler.
func New(cfg Config) *Handler {
	if len(cfg.Secret) == 0 {
		cfg.Secret = make([]byte, 32)
		if _, err := rand.Read(cfg.Secret); err != nil {
			panic(fmt.Sprintf("e2bcompat: random secret: %v", err))
		}
	}
	if cfg.Templates == nil {
		cfg.Templates = DefaultTemplates
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.PausedTimeout <= 0 {
		cfg.PausedTimeout = DefaultPausedTimeout
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = min(DefaultSandboxTimeout, cfg.MaxTimeout)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	edge := core.New(core.Config{Manager: cfg.Manager, Tenants: cfg.Tenants, Secret: cfg.Secret, TokenTTL: cfg.TokenTTL,
		Admit: cfg.Admit, Clock: cfg.Clock, Domain: cfg.Domain, Logger: cfg.Logger})
	return &Handler{
		cfg:  cfg,
		edge: edge,
		control: control.New(edge, control.Config{MaxTimeout: cfg.MaxTimeout, PausedTimeout: cfg.PausedTimeout,
			DefaultTimeout: cfg.DefaultTimeout, Templates: cfg.Templates, PlainPython: cfg.PlainPython,
			DefaultOpen: cfg.DefaultOpen, Catalog: cfg.Catalog, Builds: cfg.Builds, Volumes: cfg.Volumes}),
		envd:   envd.New(edge, envd.Config{MaxMessageBytes: cfg.MaxMessageBytes, MaxUploadBytes: cfg.MaxUploadBytes}),
		interp: interp.New(edge, interp.Config{PlainPython: cfg.PlainPython}),
	}
}

// Match reports whether r belongs to the E2B surface: a sandbox call
// (E2b-Sandbox-Id header), a signed file URL or a control-plane path.
func Match(r *http.Request) bool { return core.Match(r) }

// WriteError answers r, a request Match accepts, with err in the shape
// its route speaks: a Connect error on envd's Connect routes, the control
// plane's {code:int, message} elsewhere. The server uses it for requests it
// refuses before the handler (admission).
func WriteError(w http.ResponseWriter, r *http.Request, err error) { core.WriteError(w, r, err) }

// ServeHTTP routes by the E2b-Sandbox-Id and E2b-Sandbox-Port headers, or
// by host name (core.HostRoute).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = h.fromHost(r)
	sid := r.Header.Get(e2bwire.HeaderSandboxID)
	if !core.ConnectRoute(r) && !core.UploadRoute(r) && !core.IdentityEncoding(r.Header.Get("Content-Encoding")) {
		// Only Connect and uploads decode compressed bodies (bounded);
		// anywhere else the bytes would be taken as they are, so refuse
		// them.
		core.WriteStatus(w, http.StatusUnsupportedMediaType,
			"Content-Encoding "+r.Header.Get("Content-Encoding")+" is not supported here; send the body uncompressed")
		return
	}
	signed := core.SignedRequest(r)
	if sid == "" && !signed {
		h.control.ServeHTTP(w, r)
		return
	}
	var next http.Handler
	switch r.Header.Get(e2bwire.HeaderSandboxPort) {
	case e2bwire.EnvdPort:
		next = h.envd
	case e2bwire.InterpreterPort:
		next = h.interp
	default:
		if !signed {
			core.WriteProxyError(w, http.StatusBadGateway, sid, "The sandbox is running but port is not open")
			return
		}
		next = h.envd
	}
	var ref *core.Ref
	var err error
	if signed {
		ref, err = h.edge.ResolveSigned(r, sid)
	} else {
		ref, err = h.edge.ResolveSandbox(r, sid)
	}
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			core.WriteGone(w, r.Header.Get(e2bwire.HeaderSandboxPort), sid)
			return
		}
		core.WriteAPIError(w, err)
		return
	}
	if ref.Rec, _, err = h.wake(r.Context(), ref.TenantID, ref.Rec); err != nil {
		if errors.Is(err, ErrPausedNoWake) {
			// As a sandbox that is not running: envd's /health 502 makes
			// isRunning() false. Calls wait for no one: the sandbox is
			// frozen.
			core.WriteProxyError(w, http.StatusBadGateway, sid, "The sandbox is paused; Sandbox.connect resumes it")
			return
		}
		core.WriteAPIError(w, err)
		return
	}
	release, err := h.edge.Admit(r.Context(), ref.TenantID)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	defer release()
	next.ServeHTTP(w, r.WithContext(core.WithRef(tenant.With(r.Context(), ref.Tenant), ref)))
}

// VerifyTrafficToken checks a trafficAccessToken for sandbox sid and
// returns its tenant: the ports route (network/ports) authorizes requests
// to a sandbox's ports with it.
func (h *Handler) VerifyTrafficToken(ctx context.Context, sid, token string) (string, error) {
	t, err := h.edge.VerifyToken(ctx, token, core.PurposeTraffic, sid)
	if err != nil {
		return "", err
	}
	return t.ID, nil
}
