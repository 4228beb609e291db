package e2bcompat

import (
	"net"
	"net/http"
	"strings"

	"github.com/sandlot/sandlot/e2bwire"
)

// hostRoute reads a sandbox call addressed by host name, as the SDKs
// address one when a create returned a domain and no sandbox URL is set:
// <port>-<sandboxID>.<Config.Domain>, where port is envd's (49983) or the
// code interpreter's (49999). Other ports are the sandbox's own (the
// daemon's ports route).
func (h *Handler) hostRoute(r *http.Request) (sid, port string, ok bool) {
	if h.cfg.Domain == "" {
		return "", "", false
	}
	host := r.Host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+strings.ToLower(strings.TrimSuffix(h.cfg.Domain, ".")))
	if !ok || strings.Contains(label, ".") {
		return "", "", false
	}
	port, sid, ok = strings.Cut(label, "-")
	if !ok || sid == "" || (port != e2bwire.EnvdPort && port != e2bwire.InterpreterPort) {
		return "", "", false
	}
	return sid, port, true
}

// Match is the package's Match plus the sandbox calls addressed by host
// name (hostRoute).
func (h *Handler) Match(r *http.Request) bool {
	if _, _, ok := h.hostRoute(r); ok {
		return true
	}
	return Match(r)
}

// fromHost turns a call addressed by host name into the header form the
// rest of the handler reads; a request that names its sandbox in the
// headers keeps them (both name a sandbox the credentials must open).
func (h *Handler) fromHost(r *http.Request) *http.Request {
	if r.Header.Get(e2bwire.HeaderSandboxID) != "" {
		return r
	}
	sid, port, ok := h.hostRoute(r)
	if !ok {
		return r
	}
	r = r.Clone(r.Context())
	r.Header.Set(e2bwire.HeaderSandboxID, sid)
	r.Header.Set(e2bwire.HeaderSandboxPort, port)
	return r
}
