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
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// Ports the SDKs name in the E2b-Sandbox-Port header.
const (
	EnvdPort        = "49983"
	InterpreterPort = "49999"
)

// Headers of the E2B wire.
const (
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	HeaderAccessToken = "X-Access-Token"
	HeaderAPIKey      = "X-API-KEY"
	HeaderNextToken   = "X-Next-Token"
)

// EnvdVersion is the envd version sandlot reports. 0.6.0 takes the SDKs'
// current code paths (octet-stream uploads, closeStdin) and makes them
// refuse, client-side, the features sandlot lacks (file metadata, watch
// entries on network mounts).
const EnvdVersion = "0.6.0"

// ClientID is reported as the sandbox's clientID.
const ClientID = "sandlot"

// Config configures the handler. Manager and Authenticate are required.
type Config struct {
	Manager Manager
	// Authenticate maps an API key to its tenant (errdefs.ErrUnauthenticated
	// for an unknown key).
	Authenticate func(ctx context.Context, apiKey string) (tenantID string, err error)
	// Secret signs envdAccessTokens (HMAC-SHA256 of tenant and sandbox id).
	// Empty: a random secret per process, so tokens die with the process;
	// the server should pass a persistent one.
	Secret []byte
	// Templates maps E2B template names to sandlot templates. Names not in
	// the map pass through unchanged. Nil: DefaultTemplates.
	Templates map[string]string
	// DefaultTimeout is the sandbox TTL when a create request names none.
	// Zero: the manager's default TTL.
	DefaultTimeout time.Duration
	// MaxMessageBytes bounds one envd Connect message, after
	// decompression (a larger one is resource_exhausted). Zero:
	// DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// Logger; nil discards.
	Logger *slog.Logger
}

// DefaultMaxMessageBytes is Config.MaxMessageBytes's default. envd's
// messages are small (paths, argv, stdin chunks); files travel over /files.
const DefaultMaxMessageBytes = 8 << 20

// DefaultTemplates maps E2B's default template names to sandlot's default
// template (which has python, node and bash kernels).
var DefaultTemplates = map[string]string{
	"base":                "",
	"code-interpreter-v1": "",
	"code-interpreter":    "",
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
	// tenants remembers which tenant owns a sandbox id, learned from
	// authenticated calls: the code interpreter SDK sends no credentials
	// on its /contexts calls.
	tenants map[string]string
	// codeCtxs holds the code contexts of each sandbox.
	codeCtxs map[string]map[string]*codeContext
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
	h := &Handler{
		cfg:      cfg,
		log:      cfg.Logger,
		procs:    newProcTable(),
		tenants:  map[string]string{},
		codeCtxs: map[string]map[string]*codeContext{},
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
// (E2b-Sandbox-Id header) or a control-plane path.
func Match(r *http.Request) bool {
	if r.Header.Get(HeaderSandboxID) != "" {
		return true
	}
	p := r.URL.Path
	return p == "/sandboxes" || strings.HasPrefix(p, "/sandboxes/") ||
		p == "/v2/sandboxes" || strings.HasPrefix(p, "/v2/sandboxes/")
}

// ServeHTTP routes by the E2b-Sandbox-Id and E2b-Sandbox-Port headers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(HeaderSandboxID)
	if !connectRoute(r) && !identityEncoding(r.Header.Get("Content-Encoding")) {
		// Only Connect decodes compressed bodies (bounded); anywhere else
		// the bytes would be taken as they are, so refuse them.
		writeJSON(w, http.StatusUnsupportedMediaType, apiError{Code: http.StatusUnsupportedMediaType,
			Message: "Content-Encoding " + r.Header.Get("Content-Encoding") + " is not supported here; send the body uncompressed"})
		return
	}
	if sid == "" {
		h.control.ServeHTTP(w, r)
		return
	}
	var next http.Handler
	switch r.Header.Get(HeaderSandboxPort) {
	case EnvdPort:
		next = h.envd
	case InterpreterPort:
		next = h.interp
	default:
		writeProxyError(w, http.StatusBadGateway, sid, "The sandbox is running but port is not open")
		return
	}
	sb, err := h.resolveSandbox(r, sid)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			writeProxyError(w, http.StatusBadGateway, sid, "The sandbox was not found")
			return
		}
		writeAPIError(w, err)
		return
	}
	next.ServeHTTP(w, r.WithContext(withSandbox(tenant.WithID(r.Context(), sb.tenantID), sb)))
}

// connectRoute reports whether r is an envd Connect call, whose
// compression Connect handles within Config.MaxMessageBytes.
func connectRoute(r *http.Request) bool {
	return r.Header.Get(HeaderSandboxPort) == EnvdPort &&
		(strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/"))
}

func identityEncoding(enc string) bool {
	enc = strings.TrimSpace(enc)
	return enc == "" || strings.EqualFold(enc, "identity")
}

// sandboxRef is the sandbox a sandbox call addresses.
type sandboxRef struct {
	tenantID string
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

// resolveSandbox authenticates a sandbox call and loads its active record.
// Credentials, in order: X-Access-Token, X-API-KEY, and for the code
// interpreter's /contexts calls (which the SDK sends bare) the tenant
// learned from an earlier authenticated call on the same sandbox id.
func (h *Handler) resolveSandbox(r *http.Request, sid string) (*sandboxRef, error) {
	var tenantID string
	switch {
	case r.Header.Get(HeaderAccessToken) != "":
		t, ok := h.verifyToken(r.Header.Get(HeaderAccessToken), sid)
		if !ok {
			return nil, fmt.Errorf("invalid access token: %w", errdefs.ErrUnauthenticated)
		}
		tenantID = t
	case r.Header.Get(HeaderAPIKey) != "":
		t, err := h.authenticate(r.Context(), r.Header.Get(HeaderAPIKey))
		if err != nil {
			return nil, err
		}
		tenantID = t
	case r.Header.Get(HeaderSandboxPort) == InterpreterPort && strings.HasPrefix(r.URL.Path, "/contexts"):
		h.mu.Lock()
		tenantID = h.tenants[sid]
		h.mu.Unlock()
	}
	if tenantID == "" {
		return nil, fmt.Errorf("missing access token: %w", errdefs.ErrUnauthenticated)
	}
	rec, err := h.active(tenant.WithID(r.Context(), tenantID), tenantID, sid)
	if err != nil {
		return nil, err
	}
	h.remember(sid, tenantID)
	return &sandboxRef{tenantID: tenantID, rec: rec}, nil
}

func (h *Handler) remember(sid, tenantID string) {
	h.mu.Lock()
	h.tenants[sid] = tenantID
	h.mu.Unlock()
}

func (h *Handler) forget(sid string) {
	h.mu.Lock()
	delete(h.tenants, sid)
	delete(h.codeCtxs, sid)
	h.mu.Unlock()
}

func (h *Handler) authenticate(ctx context.Context, key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("missing API key: %w", errdefs.ErrUnauthenticated)
	}
	t, err := h.cfg.Authenticate(ctx, key)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return "", fmt.Errorf("invalid API key: %w", errdefs.ErrUnauthenticated)
		}
		return "", err
	}
	return t, nil
}

// accessToken is the envdAccessToken of a sandbox: the tenant id and an
// HMAC over tenant and sandbox id, so a sandbox call proves both without
// a lookup.
func (h *Handler) accessToken(tenantID, sid string) string {
	return "sl1." + base64.RawURLEncoding.EncodeToString([]byte(tenantID)) + "." + h.tokenMAC(tenantID, sid)
}

func (h *Handler) tokenMAC(tenantID, sid string) string {
	m := hmac.New(sha256.New, h.cfg.Secret)
	m.Write([]byte("e2b-envd\x00" + tenantID + "\x00" + sid))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *Handler) verifyToken(tok, sid string) (string, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[0] != "sl1" {
		return "", false
	}
	t, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || len(t) == 0 {
		return "", false
	}
	want := h.tokenMAC(string(t), sid)
	if !hmac.Equal([]byte(want), []byte(parts[2])) {
		return "", false
	}
	return string(t), true
}

// apiError is the control plane's error body.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeAPIError writes err as {code, message} with its category's status.
func writeAPIError(w http.ResponseWriter, err error) {
	status := errdefs.HTTPStatus(err)
	writeJSON(w, status, apiError{Code: status, Message: errdefs.PublicMessage(err)})
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
