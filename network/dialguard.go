package network

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// DialGuard keeps connections the daemon makes on a tenant's behalf (a
// template pull from the registry the tenant names) away from what is not
// the public internet: the ranges a sandbox may not reach either
// (policy.Forbidden: loopback, private, link-local, CGNAT, unspecified,
// ...), the cloud metadata addresses and the host's own addresses. It
// decides at connect time, on the address being dialed, so neither a
// name that resolves to such an address (or changes its answer between a
// check and the dial) nor a redirect gets around it.
type DialGuard struct {
	// Allow are ranges the operator opened. As for a sandbox
	// (policy.Effective.Reachable), the metadata addresses and the host's
	// own open only when listed exactly (/32, /128).
	Allow []netip.Prefix
}

// guardHost answers the host's-own-address question for every guard.
var guardHost hostAddrs

// Check returns nil when a may be dialed, else a permission_denied error
// that says why.
func (g DialGuard) Check(a netip.Addr) error {
	internal := func(a netip.Addr) string {
		if guardHost.has(a) {
			return "host address"
		}
		return ""
	}
	d := (&policy.Effective{Reachable: g.Allow}).CheckAddr(a, internal)
	if d.Allow {
		return nil
	}
	return fmt.Errorf("connection refused by the daemon: %s is not on the public internet (%s); the operator opens ranges with --pull-allow-cidr: %w",
		a.Unmap(), d.Reason, errdefs.ErrPermissionDenied)
}

// control is a net.Dialer Control: it sees the address after name
// resolution, just before connect.
func (g DialGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %q: %v: %w", address, err, errdefs.ErrPermissionDenied)
	}
	return g.Check(ap.Addr())
}

// Dialer returns a dialer whose every connection passes Check.
func (g DialGuard) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
}

// Transport returns an HTTP transport whose connections pass Check. It
// uses no proxy from the environment: a proxy would make the connection
// the guard sees the proxy's, not the registry's.
func (g DialGuard) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	d := g.Dialer()
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return t
}
