package e2bcompat

import (
	"net/http"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/e2bwire"
)

// Match is the package's Match plus the sandbox calls addressed by host
// name (core.HostRoute).
func (h *Handler) Match(r *http.Request) bool {
	if _, _, ok := core.HostRoute(h.cfg.Domain, r); ok {
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
	sid, port, ok := core.HostRoute(h.cfg.Domain, r)
	if !ok {
		return r
	}
	r = r.Clone(r.Context())
	r.Header.Set(e2bwire.HeaderSandboxID, sid)
	r.Header.Set(e2bwire.HeaderSandboxPort, port)
	return r
}
