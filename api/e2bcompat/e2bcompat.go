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
package e2bcompat

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// EnvdVersion is the envd version sandlot reports. 0.6.4 takes the SDKs'
// current code paths (octet-stream uploads, closeStdin), file metadata
// (0.6.2: X-Metadata-* headers, EntryInfo.metadata), watch events with
// their entry (0.6.3: includeEntry) and the opt-in to watching network
// mounts (0.6.4: allowNetworkMounts), which changes nothing here: a
// sandlot sandbox has no network mounts, so every directory it can watch
// is watched with or without the flag, as envd watches a local one.
const EnvdVersion = "0.6.4"

// ClientID is reported as the sandbox's clientID.
const ClientID = "sandlot"

// Tenants resolves the credentials of E2B calls. *tenant.Authenticator
// implements it, with the cache every edge shares.
type Tenants interface {
	// Key returns the tenant of an API key (errdefs.ErrUnauthenticated
	// for a missing, malformed or unknown key).
	Key(ctx context.Context, key string) (*tenant.Tenant, error)
	// Tenant returns a tenant by id (errdefs.ErrNotFound when it was
	// deleted). Access tokens name the tenant's key generation and
	// creation time, and a token is honoured only while both still match:
	// rotating the key or deleting the tenant revokes it.
	Tenant(ctx context.Context, id string) (*tenant.Tenant, error)
}

var _ Tenants = (*tenant.Authenticator)(nil)

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
	// record into it (templatelist.go). Nil: those routes answer
	// failed_precondition (aliases: only Templates' names exist).
	Catalog Catalog
	// Builds, when set, serves E2B's template builds (templates.go),
	// recording into its own catalog (the daemon's, Catalog's); nil: those
	// routes answer failed_precondition.
	Builds *Builds
	// Logger; nil discards.
	Logger *slog.Logger
}

// domain is Config.Domain for the wire (null when unset).
func (h *Handler) domain() *string {
	if h.cfg.Domain == "" {
		return nil
	}
	d := h.cfg.Domain
	return &d
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
// adds R and Java (built when first asked for). docs/e2b.md says why.
var DefaultTemplates = map[string]string{
	"base":                    "",
	"code-interpreter-v1":     "",
	templates.CodeInterpreter: templates.CodeInterpreter,
}

// Handler serves the E2B wire. It is safe for concurrent use.
type Handler struct {
	cfg     Config
	log     *slog.Logger
	control *http.ServeMux
	envd    http.Handler
	interp  *http.ServeMux
	procs   *procTable

	mu sync.Mutex
	// codeCtxs holds the code contexts of each sandbox.
	codeCtxs map[string]map[string]*codeContext
	// signers holds the envd tokens issued per sandbox, newest last, to
	// check signed file URLs (signed.go).
	signers map[string][]string
	// metrics holds the usage samples taken per sandbox (metrics.go).
	metrics map[string][]metricSample
	// watchers holds the created directory watchers by id, watching
	// counts the watchers per sandbox (watch.go).
	watchers map[string]*watcher
	watching map[string]int
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
	h := &Handler{
		cfg:      cfg,
		log:      cfg.Logger,
		procs:    newProcTable(),
		codeCtxs: map[string]map[string]*codeContext{},
		signers:  map[string][]string{},
		metrics:  map[string][]metricSample{},
		watchers: map[string]*watcher{},
		watching: map[string]int{},
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.control = h.controlMux()
	h.envd = h.envdMux()
	h.interp = h.interpMux()
	return h
}

// Match reports whether r belongs to the E2B surface: a sandbox call
// (E2b-Sandbox-Id header), a signed file URL or a control-plane path.
func Match(r *http.Request) bool {
	if r.Header.Get(e2bwire.HeaderSandboxID) != "" || signedRequest(r) {
		return true
	}
	p := r.URL.Path
	return p == "/sandboxes" || strings.HasPrefix(p, "/sandboxes/") ||
		p == "/v2/sandboxes" || strings.HasPrefix(p, "/v2/sandboxes/") ||
		p == "/v3/templates" || p == "/templates" || p == "/v2/templates" || strings.HasPrefix(p, "/templates/") || strings.HasPrefix(p, "/v2/templates/")
}

// ServeHTTP routes by the E2b-Sandbox-Id and E2b-Sandbox-Port headers, or
// by host name (hostRoute).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = h.fromHost(r)
	sid := r.Header.Get(e2bwire.HeaderSandboxID)
	if !connectRoute(r) && !uploadRoute(r) && !identityEncoding(r.Header.Get("Content-Encoding")) {
		// Only Connect and uploads decode compressed bodies (bounded);
		// anywhere else the bytes would be taken as they are, so refuse
		// them.
		writeJSON(w, http.StatusUnsupportedMediaType, apiError{Code: http.StatusUnsupportedMediaType,
			Message: "Content-Encoding " + r.Header.Get("Content-Encoding") + " is not supported here; send the body uncompressed"})
		return
	}
	signed := signedRequest(r)
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
			writeProxyError(w, http.StatusBadGateway, sid, "The sandbox is running but port is not open")
			return
		}
		next = h.envd
	}
	var sb *sandboxRef
	var err error
	if signed {
		sb, err = h.resolveSigned(r, sid)
	} else {
		sb, err = h.resolveSandbox(r, sid)
	}
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			writeGone(w, r.Header.Get(e2bwire.HeaderSandboxPort), sid)
			return
		}
		writeAPIError(w, err)
		return
	}
	if sb.rec, _, err = h.wake(r.Context(), sb.tenantID, sb.rec); err != nil {
		if errors.Is(err, ErrPausedNoWake) {
			// As a sandbox that is not running: envd's /health 502 makes
			// isRunning() false. Calls wait for no one: the sandbox is
			// frozen.
			writeProxyError(w, http.StatusBadGateway, sid, "The sandbox is paused; Sandbox.connect resumes it")
			return
		}
		writeAPIError(w, err)
		return
	}
	release, err := h.admit(r.Context(), sb.tenantID)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	defer release()
	next.ServeHTTP(w, r.WithContext(withSandbox(tenant.With(r.Context(), sb.tenant), sb)))
}

// connectRoute reports whether r is an envd Connect call, whose
// compression Connect handles within Config.MaxMessageBytes.
func connectRoute(r *http.Request) bool {
	return r.Header.Get(e2bwire.HeaderSandboxPort) == e2bwire.EnvdPort &&
		(strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/"))
}

// uploadRoute reports whether r is envd's POST /files, which inflates a
// gzip body within Config.MaxUploadBytes (writeFiles).
func uploadRoute(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/files" &&
		(r.Header.Get(e2bwire.HeaderSandboxPort) == e2bwire.EnvdPort || r.Header.Get(e2bwire.HeaderSandboxID) == "")
}

func identityEncoding(enc string) bool {
	enc = strings.TrimSpace(enc)
	return enc == "" || strings.EqualFold(enc, "identity")
}

// sandboxRef is the sandbox a sandbox call addresses.
type sandboxRef struct {
	tenantID string
	tenant   *tenant.Tenant
	rec      *contexts.Record
}

type sandboxKey struct{}

func withSandbox(ctx context.Context, s *sandboxRef) context.Context {
	return context.WithValue(ctx, sandboxKey{}, s)
}

func sandboxFrom(ctx context.Context) *sandboxRef {
	s, _ := ctx.Value(sandboxKey{}).(*sandboxRef)
	return s
}

// apiError is the control plane's error body.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// WriteError answers r, a request Match accepts, with err in the shape
// its route speaks: a Connect error on envd's Connect routes, the control
// plane's {code:int, message} elsewhere. The server uses it for requests it
// refuses before the handler (admission).
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if !connectRoute(r) {
		writeAPIError(w, err)
		return
	}
	status := errdefs.HTTPStatus(err)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, struct {
		Code    errdefs.Code `json:"code"`
		Message string       `json:"message"`
	}{errdefs.CodeOf(err), publicMessage(err)})
}

// writeAPIError writes err as {code, message} with its category's status.
func writeAPIError(w http.ResponseWriter, err error) {
	status := errdefs.HTTPStatus(err)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, apiError{Code: status, Message: publicMessage(err)})
}

// writeGone answers a call to a sandbox that is not there (any more) as
// E2B does: 404 on the code interpreter's port (the code interpreter SDK
// throws NotFoundError), the edge proxy's 502 elsewhere (the SDKs read it
// as "not running").
func writeGone(w http.ResponseWriter, port, sid string) {
	status := http.StatusBadGateway
	if port == e2bwire.InterpreterPort {
		status = http.StatusNotFound
	}
	writeProxyError(w, status, sid, "The sandbox was not found")
}

// writeProxyError mimics the E2B edge proxy's answer for a sandbox or port
// that is not there; the SDKs read 502 as "sandbox gone".
func writeProxyError(w http.ResponseWriter, status int, sid, msg string) {
	writeJSON(w, status, struct {
		SandboxID string `json:"sandboxId"`
		Message   string `json:"message"`
		Code      int    `json:"code"`
	}{sid, msg, status})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"code":500,"message":"internal error"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// runtimeID matches sandlot's runtime sandbox id where an error names it
// ("sandbox sb-0123456789ab: fs.write: …", the agent client's prefix). E2B
// callers know the sandbox by its E2B id; the runtime's is internal.
var runtimeID = regexp.MustCompile(`sandbox ` + regexp.QuoteMeta(runtime.IDPrefix) + `[0-9a-f]+: `)

// publicMessage is errdefs.PublicMessage without runtime sandbox ids.
func publicMessage(err error) string {
	return runtimeID.ReplaceAllString(errdefs.PublicMessage(err), "")
}
