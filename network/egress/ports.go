package egress

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/ports"
)

// PortsRoute is the daemon's route to sandbox ports (network/ports'
// Handler). The proxy answers plain HTTP requests for names under its
// domain itself, in process, with that very handler: the route's own
// checks (public ports, or the traffic token) decide, exactly as for a
// request from outside, and the connection never leaves the daemon for
// the host's loopback or anything else.
type PortsRoute interface {
	http.Handler
	// Match reports whether the route serves r (by host or by path).
	Match(r *http.Request) bool
}

// portsRoute is the route and the domain whose names it answers.
type portsRoute struct {
	domain string // lower-case, no trailing dot
	h      PortsRoute
}

// SetPorts makes the proxy answer requests for <port>-<id>.<domain>
// with h. Call it before Serve; a nil h turns it off.
func (p *Proxy) SetPorts(domain string, h PortsRoute) {
	if h == nil {
		p.ports.Store(nil)
		return
	}
	p.ports.Store(&portsRoute{domain: strings.ToLower(strings.TrimSuffix(domain, ".")), h: h})
}

// name returns host (with or without a port) lower-case without its
// trailing dot, and whether it is a name under the ports domain. A nil
// route owns nothing.
func (pr *portsRoute) name(host string) (string, bool) {
	if pr == nil {
		return "", false
	}
	name, _, ok := policy.OneLabelUnder(host, pr.domain)
	return name, ok
}

// ServeHTTP answers one request of a sandbox's connection to the ports
// domain. Every request on the connection is checked, not only the
// first one the proxy peeked at: a later one naming another host, or
// the path form under another host, is refused.
func (pr *portsRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := pr.name(r.Host); !ok {
		http.Error(w, "sandlot: egress denied: this connection serves the ports route only ("+pr.domain+")", http.StatusMisdirectedRequest)
		return
	}
	if !pr.h.Match(r) {
		// E2B's envd and code interpreter ports, which the daemon's E2B
		// surface answers by host name: not a door into the daemon's API
		// from inside a sandbox.
		http.Error(w, "sandlot: egress denied: "+trim(r.Host)+" is not a sandbox port the route serves", http.StatusForbidden)
		return
	}
	pr.h.ServeHTTP(w, r)
}

// portsHeaderTimeout bounds the arrival of a request's head on the
// in-process ports server.
const portsHeaderTimeout = 10 * time.Second

// servePorts serves sandbox sb's HTTP connection c (whose first bytes
// br has peeked) with the ports route until either side closes it, and
// puts the bytes read from and written to the sandbox into ev.
func (p *Proxy) servePorts(c net.Conn, br *bufio.Reader, pr *portsRoute, sb *Sandbox, ev *audit.Event) {
	done := make(chan struct{})
	cc := &countedConn{Conn: c, r: br, closed: sync.OnceFunc(func() { close(done) })}
	src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The route knows the request comes from inside sb: without
			// internet access it reaches only sb's tenant's sandboxes.
			// Each request is judged by the sandbox's policy as it is
			// now, so an update applies to a kept-alive connection too.
			cur, ok := p.reg.Lookup(src)
			if !ok || cur.ID != sb.ID || cur.Policy == nil {
				http.Error(w, "sandlot: egress denied: the sandbox's network changed", http.StatusForbidden)
				return
			}
			caller := ports.Caller{Tenant: cur.Tenant, Internet: cur.Policy.Mode() == policy.Open}
			pr.ServeHTTP(w, r.WithContext(ports.WithCaller(r.Context(), caller)))
		}),
		// A request's head must arrive within this; the route's transport
		// bounds the wait for the sandbox's answer (ports.Config).
		ReadHeaderTimeout: portsHeaderTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    maxHead,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go srv.Serve(&oneConnListener{c: cc, done: done})
	<-done
	ev.BytesUp, ev.BytesDown = cc.up.Load(), cc.down.Load()
}

// countedConn reads through the proxy's peek buffer, counts both ways and
// says when the HTTP server (or a hijacker: a WebSocket) closed it.
type countedConn struct {
	net.Conn
	r        io.Reader
	up, down atomic.Int64
	closed   func()
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.up.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.down.Add(int64(n))
	return n, err
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.closed()
	return err
}

// oneConnListener hands http.Server one connection, then blocks until it
// is closed, so Serve returns with it.
type oneConnListener struct {
	c    net.Conn
	once sync.Once
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.c })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }
