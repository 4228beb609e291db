// Package ports exposes the TCP ports of sandboxes through the daemon's
// HTTP listener, as E2B does: by host name, <port>-<sandboxId>.<domain>
// (the default domain, sandlot.localhost, resolves to loopback), and by
// path for local use, <prefix><sandboxId>/ports/<port>/<path>. It proxies
// HTTP and WebSocket (the upgrade passes through) to the sandbox's address
// on its veth. A request needs the sandbox's traffic access token in the
// e2b-traffic-access-token header unless the sandbox asked for public
// ports; the token is checked by a callback and never reaches the sandbox.
// What a sandbox answers passes the egress guard (Config.Guard): headers,
// bodies streamed with the guard's file rules, WebSocket messages.
package ports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
)

// DefaultDomain is a name under .localhost (RFC 6761), which browsers and
// many resolvers send to loopback, so <port>-<id>.sandlot.localhost works
// on a laptop without DNS setup.
const DefaultDomain = "sandlot.localhost"

// DefaultPathPrefix starts the path form: /v1/contexts/<id>/ports/<port>/...
const DefaultPathPrefix = "/v1/contexts/"

// Target is where a sandbox's ports are, and how they may be reached.
type Target struct {
	Addr    netip.Addr
	Ingress policy.Ingress
	// Tenant owns the sandbox: a request from inside another tenant's
	// sandbox is refused unless that sandbox may reach the internet
	// (WithCaller). Its guard judges what the sandbox answers.
	Tenant string
	// Context is the execution context the sandbox serves ("" for none):
	// the guard masks its declared secrets too.
	Context string
	// Asleep says the sandbox's context is suspended to disk: it has no
	// sandbox and no address until Wake wakes it, after which the route
	// looks the target up again. Ingress and Tenant are its context's, so
	// the token check runs before anything wakes.
	Asleep bool
}

// Caller is the sandbox a request comes from when it reaches the route
// from inside (the egress proxy answers the ports domain in process).
type Caller struct {
	Tenant string
	// Internet: the caller's policy lets it reach the internet (mode
	// open), where the daemon's front door is anyway; without it, only
	// its own tenant's sandboxes are reachable, or "no egress" would have
	// a way out through another tenant's public port.
	Internet bool
}

type callerKey struct{}

// WithCaller marks ctx's request as coming from inside a sandbox.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// Config configures a Handler. Lookup and Authorize are required.
type Config struct {
	Domain     string // default DefaultDomain
	PathPrefix string // default DefaultPathPrefix
	// Lookup returns a sandbox's target; an error wrapping
	// errdefs.ErrNotFound answers 404.
	Lookup func(ctx context.Context, sandboxID string) (Target, error)
	// Authorize checks a traffic access token for a sandbox (constant
	// time, please); nil means allowed.
	Authorize func(ctx context.Context, sandboxID, token string) error
	// Wake, when set, runs before an authorized request is proxied: it
	// resumes a paused sandbox that asked to be resumed by traffic (the
	// request waits for it) and says so, or fails
	// (errdefs.ErrFailedPrecondition: the sandbox is paused, 502 as a
	// sandbox that is not running). After a resume the port gets
	// WakeGrace to accept: a server that was frozen while starting
	// listens a moment later.
	Wake func(ctx context.Context, sandboxID string) (resumed bool, err error)
	// Dial reaches the sandbox (default: a net.Dialer).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	Log  *slog.Logger
	// Reserved are ports the daemon answers itself in the host form
	// (E2B's envd and code interpreter, ReservedE2B): Match leaves those
	// hosts to another handler. The path form still reaches the sandbox.
	Reserved []int
	// ResponseTimeout bounds the wait for a sandbox's answer (its
	// response head) once a request reached it (default
	// DefaultResponseTimeout): a server that never answers would hold
	// the caller's connection and the route's to the sandbox for ever.
	// Streams (a WebSocket, a long response) are not cut once answered.
	ResponseTimeout time.Duration
	// MaxIdleConns bounds the route's idle connections to sandboxes, all
	// sandboxes and ports together (default 256; 16 per port).
	MaxIdleConns int
	// Guard judges everything a sandbox answers through the route: its
	// headers, its bodies (streamed, with the guard's file rules), its
	// WebSocket messages. Nil relays them as they are (tests only; serve
	// always sets it, and the tenant's guard mode off is how an operator
	// makes a tenant's route raw).
	Guard Guard
}

// DefaultResponseTimeout is Config.ResponseTimeout's default.
const DefaultResponseTimeout = 2 * time.Minute

// ReservedE2B are the ports of E2B's envd (49983) and code interpreter
// (49999), which the E2B surface serves for every sandbox.
var ReservedE2B = []int{49983, 49999}

// Handler routes requests to sandbox ports.
type Handler struct {
	cfg   Config
	proxy *httputil.ReverseProxy
	log   *slog.Logger
}

type routeKey struct{}

type route struct {
	id     string
	port   int
	path   string // upstream path (path form), "" to keep the request's
	target Target
	woken  bool     // Wake resumed the sandbox for this request
	guard  *guarded // nil: relayed as it is
}

// WakeGrace is how long a port of a sandbox that was just resumed may
// refuse connections before the route answers that it is not open.
const WakeGrace = 10 * time.Second

// dial reaches the sandbox; for a request that woke it, a refused
// connection is tried again every 100 ms within WakeGrace.
func (h *Handler) dial(ctx context.Context, network, address string) (net.Conn, error) {
	rt, _ := ctx.Value(routeKey{}).(*route)
	c, err := h.cfg.Dial(ctx, network, address)
	if rt == nil || !rt.woken {
		return c, err
	}
	deadline := time.Now().Add(WakeGrace)
	for err != nil && errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
		c, err = h.cfg.Dial(ctx, network, address)
	}
	return c, err
}

// New returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Lookup == nil || cfg.Authorize == nil {
		return nil, errors.New("ports: Lookup and Authorize are required")
	}
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	cfg.Domain = strings.ToLower(strings.TrimSuffix(cfg.Domain, "."))
	if cfg.PathPrefix == "" {
		cfg.PathPrefix = DefaultPathPrefix
	}
	if !strings.HasPrefix(cfg.PathPrefix, "/") || !strings.HasSuffix(cfg.PathPrefix, "/") {
		return nil, fmt.Errorf("ports: path prefix %q must start and end with /", cfg.PathPrefix)
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 5 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ResponseTimeout <= 0 {
		cfg.ResponseTimeout = DefaultResponseTimeout
	}
	if cfg.MaxIdleConns <= 0 {
		cfg.MaxIdleConns = 256
	}
	h := &Handler{cfg: cfg, log: cfg.Log}
	h.proxy = &httputil.ReverseProxy{
		Rewrite: h.rewrite,
		Transport: &http.Transport{
			DialContext:           h.dial,
			MaxIdleConns:          cfg.MaxIdleConns,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: cfg.ResponseTimeout,
		},
		ModifyResponse: func(res *http.Response) error {
			rt := res.Request.Context().Value(routeKey{}).(*route)
			if rt.guard == nil {
				return nil
			}
			guardHeader(res.Header, rt.guard.text)
			return rt.guard.guardResponse(res)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			rt := r.Context().Value(routeKey{}).(*route)
			h.log.Debug("ports: upstream failed", logkey.Sandbox, rt.id, "port", rt.port, logkey.Err, err)
			if errors.Is(err, errUnguardable) {
				writeJSON(w, http.StatusBadGateway, "unavailable", strings.TrimPrefix(err.Error(), errUnguardable.Error()+": "))
				return
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				writeJSON(w, http.StatusGatewayTimeout, errdefs.CodeDeadlineExceeded, fmt.Sprintf("port %d of the sandbox did not answer within %s", rt.port, cfg.ResponseTimeout))
				return
			}
			writeJSON(w, http.StatusBadGateway, "unavailable", fmt.Sprintf("the sandbox is running but port %d is not open", rt.port))
		},
		ErrorLog: slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug),
	}
	return h, nil
}

// Host returns the host name that reaches port of a sandbox.
func Host(domain, sandboxID string, port int) string {
	return strconv.Itoa(port) + "-" + sandboxID + "." + domain
}

// Match reports whether r is for a sandbox port (by host or by path).
func (h *Handler) Match(r *http.Request) bool {
	if _, port, ok := h.parseHost(r.Host); ok {
		for _, p := range h.cfg.Reserved {
			if port == strconv.Itoa(p) {
				return false
			}
		}
		return true
	}
	_, _, _, ok := h.parsePath(r.URL.Path)
	return ok
}

// parseHost reads <port>-<id>.<domain>.
func (h *Handler) parseHost(hostport string) (string, string, bool) {
	_, label, ok := policy.OneLabelUnder(hostport, h.cfg.Domain)
	if !ok {
		return "", "", false
	}
	port, id, ok := strings.Cut(label, "-")
	return id, port, ok
}

// parsePath reads <prefix><id>/ports/<port>[/rest].
func (h *Handler) parsePath(p string) (id, port, rest string, ok bool) {
	tail, ok := strings.CutPrefix(p, h.cfg.PathPrefix)
	if !ok {
		return "", "", "", false
	}
	id, tail, ok = strings.Cut(tail, "/ports/")
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", "", "", false
	}
	port, rest, _ = strings.Cut(tail, "/")
	return id, port, "/" + rest, port != ""
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := &route{}
	id, port, ok := h.parseHost(r.Host)
	if !ok {
		id, port, rt.path, ok = h.parsePath(r.URL.Path)
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, errdefs.CodeNotFound, "not a sandbox port address")
		return
	}
	if err := validID(id); err != nil {
		writeJSON(w, http.StatusBadRequest, errdefs.CodeInvalidArgument, err.Error())
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		writeJSON(w, http.StatusBadRequest, errdefs.CodeInvalidArgument, fmt.Sprintf("bad port %q", trim(port)))
		return
	}
	rt.id, rt.port = id, n
	t, err := h.cfg.Lookup(r.Context(), id)
	if err != nil && rt.path == "" && errors.Is(err, errdefs.ErrNotFound) {
		// By host name, as E2B's edge answers for a sandbox that is not
		// there (the SDKs and E2B's tests read this body).
		writeEdgeError(w, id, "The sandbox was not found")
		return
	}
	if err != nil {
		status := errdefs.HTTPStatus(err)
		if status >= 500 {
			h.log.Warn("ports: lookup failed", logkey.Sandbox, id, logkey.Err, err)
		}
		writeJSON(w, status, errdefs.CodeOf(err), errdefs.PublicMessage(err))
		return
	}
	if !t.Addr.IsValid() && !t.Asleep {
		writeJSON(w, http.StatusBadGateway, "unavailable", "the sandbox has no network")
		return
	}
	rt.target = t
	if c, ok := r.Context().Value(callerKey{}).(Caller); ok && !c.Internet && c.Tenant != t.Tenant {
		writeJSON(w, http.StatusForbidden, errdefs.CodePermissionDenied,
			"another tenant's sandbox: from inside a sandbox without internet access the ports route reaches only its own tenant's sandboxes")
		return
	}
	if !t.Ingress.Public {
		token := r.Header.Get(e2bwire.HeaderTrafficToken)
		if token == "" {
			writeJSON(w, http.StatusForbidden, errdefs.CodePermissionDenied, "missing traffic access token (header "+strings.ToLower(e2bwire.HeaderTrafficToken)+")")
			return
		}
		if err := h.cfg.Authorize(r.Context(), id, token); err != nil {
			writeJSON(w, http.StatusForbidden, errdefs.CodePermissionDenied, "invalid traffic access token")
			return
		}
	}
	if h.cfg.Wake != nil {
		resumed, err := h.cfg.Wake(r.Context(), id)
		rt.woken = resumed
		if err != nil {
			switch {
			case errors.Is(err, errdefs.ErrNotFound):
				writeEdgeError(w, id, "The sandbox was not found")
			case errors.Is(err, errdefs.ErrFailedPrecondition):
				writeEdgeError(w, id, "The sandbox is paused")
			default:
				h.log.Warn("ports: wake failed", logkey.Sandbox, id, logkey.Err, err)
				writeJSON(w, errdefs.HTTPStatus(err), errdefs.CodeOf(err), errdefs.PublicMessage(err))
			}
			return
		}
	}
	if t.Asleep {
		// Woken (or not) by Wake: the new sandbox has a network of its
		// own, at a new address.
		if rt.woken {
			t, err = h.cfg.Lookup(r.Context(), id)
		}
		if !rt.woken || err != nil || !t.Addr.IsValid() || t.Asleep {
			writeEdgeError(w, id, "The sandbox is paused")
			return
		}
		rt.target = t
	}
	if h.cfg.Guard != nil {
		if body := h.cfg.Guard.Body(r.Context(), t); body != nil {
			rt.guard = &guarded{g: h.cfg.Guard, ctx: r.Context(), t: t, body: body}
			w = &guardedWriter{ResponseWriter: w, text: rt.guard.text}
		}
	}
	h.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, rt)))
}

// writeEdgeError answers as E2B's edge proxy does for a sandbox that is
// not there or not running: 502 {sandboxId, message, code}.
func writeEdgeError(w http.ResponseWriter, id, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	json.NewEncoder(w).Encode(struct {
		SandboxID string `json:"sandboxId"`
		Message   string `json:"message"`
		Code      int    `json:"code"`
	}{id, msg, http.StatusBadGateway})
}

func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	rt := pr.In.Context().Value(routeKey{}).(*route)
	pr.SetURL(&url.URL{Scheme: "http", Host: netip.AddrPortFrom(rt.target.Addr, uint16(rt.port)).String()})
	// Forwarding headers say what the route saw, never what the caller
	// wrote: an app that trusts X-Forwarded-For (rate limits, allowlists,
	// logs) must not be told a forged address. ReverseProxy already drops
	// Forwarded and X-Forwarded-For/-Host/-Proto from pr.Out.
	for _, k := range spoofable {
		pr.Out.Header.Del(k)
	}
	if rt.path != "" {
		pr.Out.URL.Path, pr.Out.URL.RawPath = rt.path, ""
		pr.Out.Header.Set("X-Forwarded-Prefix", strings.TrimSuffix(pr.In.URL.Path, strings.TrimPrefix(rt.path, "/")))
	}
	pr.Out.Header.Del(e2bwire.HeaderTrafficToken)
	if rt.guard != nil {
		guardRequest(pr.Out.Header)
	}
	// X-Forwarded-For and -Host, not -Proto: the daemon may sit behind a
	// TLS terminator, and a wrong scheme breaks more apps than none.
	if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
		pr.Out.Header.Set("X-Forwarded-For", ip)
	}
	pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
	if masked := rt.target.Ingress.MaskedHost(rt.port); masked != "" {
		pr.Out.Host = masked
	} else {
		pr.Out.Host = pr.In.Host
	}
}

// spoofable are client-set headers that apps read as the proxy's word
// about the client, beyond those ReverseProxy removes itself.
var spoofable = []string{"X-Real-Ip", "X-Forwarded-Prefix", "X-Forwarded-Port", "X-Forwarded-Server",
	"X-Forwarded-Ssl", "X-Client-Ip", "True-Client-Ip", "X-Original-Forwarded-For"}

func validID(id string) error {
	if id == "" || len(id) > 128 {
		return errors.New("bad sandbox id")
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return errors.New("bad sandbox id")
		}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, code errdefs.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": string(code), "message": msg})
}

func trim(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
