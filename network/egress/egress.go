// Package egress is the daemon-side proxy every TCP connection of a
// sandbox is redirected to (by the kernel rules of package nft). It tells
// the sandbox by the connection's source address, recovers the original
// destination (SO_ORIGINAL_DST), reads the TLS SNI or the HTTP Host the
// sandbox sent, and decides against the sandbox's policy:
//
//   - a destination address that an address rule (or mode open) allows is
//     dialed as the sandbox asked;
//   - otherwise a name the policy allows is resolved by the proxy itself
//     and one of its addresses dialed, so a sandbox cannot pair an allowed
//     name with an address of its choice, and every address is checked
//     against the forbidden ranges again (DNS rebinding);
//   - a connection without a name is named by the resolver's earlier
//     answer to this sandbox for that address, if any.
//
// Allowed bytes are spliced (the kernel's splice(2) through io.Copy).
// When the destination name has secrets or header rules, the proxy
// instead terminates TLS with a certificate from the sandbox's CA, swaps
// placeholders for secret values in the requests (headers, target, and
// bodies up to Config.MaxBody), re-encrypts to the real server (verifying
// its certificate), and swaps the values back out of the responses.
// Every connection ends in one audit event.
//
// Sandboxes given the proxy's address instead (pods on Kubernetes) reach
// the same decision through a forward-proxy front (ServeForward), which
// knows a sandbox by its credential and its source address.
package egress

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/ca"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/secret"
)

// Sandbox is what the proxy knows of the sandbox at one address.
type Sandbox struct {
	ID, Tenant string
	Policy     *policy.Effective
	Secrets    *secret.Set // may be nil
	CA         *ca.CA      // required when Secrets or Policy.Headers are set
}

// Registry maps sandbox addresses to sandboxes. It is safe for concurrent
// use; a Register replaces the entry, so a policy update takes effect on
// the next connection (and on open ones after Proxy.Recheck).
type Registry struct {
	mu sync.RWMutex
	m  map[netip.Addr]*Sandbox
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[netip.Addr]*Sandbox{}} }

// Register sets the sandbox at addr.
func (r *Registry) Register(addr netip.Addr, sb *Sandbox) {
	r.mu.Lock()
	r.m[addr.Unmap()] = sb
	r.mu.Unlock()
}

// Unregister removes the sandbox at addr.
func (r *Registry) Unregister(addr netip.Addr) {
	r.mu.Lock()
	delete(r.m, addr.Unmap())
	r.mu.Unlock()
}

// Lookup returns the sandbox at addr.
func (r *Registry) Lookup(addr netip.Addr) (*Sandbox, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	sb, ok := r.m[addr.Unmap()]
	return sb, ok
}

// Config configures a Proxy. Resolve is required.
type Config struct {
	// Resolve returns the IPv4 addresses of a name (resolver.LookupIP).
	Resolve func(ctx context.Context, name string) ([]netip.Addr, error)
	// Names returns the name the resolver answered for an address to a
	// sandbox (resolver.NameFor); nil: connections without SNI or Host
	// are judged by address only.
	Names func(sandboxID string, a netip.Addr) (string, bool)
	// Internal names the host's and the pool's addresses (network.Manager.Internal).
	Internal policy.Internal
	// Dial opens upstream connections (default: a net.Dialer).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// RootCAs verifies upstream servers on the TLS-terminating path (nil:
	// the host's trust store).
	RootCAs *x509.CertPool
	Audit   audit.Func
	Log     *slog.Logger
	// PeekTimeout bounds the wait for a sandbox's first bytes (default 1s);
	// protocols where the server speaks first wait this long, then are
	// judged by address.
	PeekTimeout time.Duration
	// DialTimeout bounds an upstream dial and TLS handshake (default 10s).
	DialTimeout time.Duration
	// MaxBody is the largest request body (with a Content-Length, not
	// compressed) in which placeholders are replaced (default 256 KiB; it
	// is held in memory); larger or streamed bodies pass unchanged.
	MaxBody int64
	// Limits bound the descriptors the proxy holds, per sandbox, per
	// tenant and in all (zero fields take defaults from the process's
	// RLIMIT_NOFILE; see Limits).
	Limits Limits
	// IdleTimeout closes a TLS-terminated connection idle between
	// requests this long (default 5m).
	IdleTimeout time.Duration
}

// Proxy is the egress proxy.
type Proxy struct {
	reg *Registry
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	flows   map[net.Conn]*flow // by the sandbox's side
	counts  map[string]int     // descriptors held per sandbox
	tenants map[string]int     // descriptors held per tenant
	total   int                // descriptors held in all
	closed  bool
	shed    time.Time // when shedding was last logged

	ports atomic.Pointer[portsRoute] // SetPorts; nil: none
}

// New returns a Proxy over reg.
func New(reg *Registry, cfg Config) (*Proxy, error) {
	if reg == nil || cfg.Resolve == nil {
		return nil, errors.New("egress: a registry and Resolve are required")
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.PeekTimeout == 0 {
		cfg.PeekTimeout = time.Second
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 256 << 10
	}
	cfg.Limits = cfg.Limits.withDefaults(nofile())
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	return &Proxy{reg: reg, cfg: cfg, log: cfg.Log, flows: map[net.Conn]*flow{}, counts: map[string]int{}, tenants: map[string]int{}}, nil
}

// Limits returns the bounds in force (defaults filled in).
func (p *Proxy) Limits() Limits { return p.cfg.Limits }

// Serve accepts redirected connections on l until l is closed. A failed
// accept (EMFILE, ENFILE, ENOBUFS, an aborted connection) is waited out
// and tried again: returning would leave every sandbox of every tenant
// without egress until the daemon restarts.
func (p *Proxy) Serve(l net.Listener) error {
	var wait time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.isClosed() {
				return nil
			}
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			p.log.Warn("egress: accept failed; trying again", logkey.Err, err, "in", wait)
			time.Sleep(wait)
			continue
		}
		wait = 0
		go p.handle(c)
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close closes every open connection; Serve stops when its listener is
// closed by the caller.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for _, f := range p.flows {
		f.close()
	}
	p.mu.Unlock()
	return nil
}

func (p *Proxy) handle(c net.Conn) {
	defer c.Close()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	sb, ok := p.reg.Lookup(src)
	if !ok || sb.Policy == nil {
		p.log.Debug("egress: connection from an unknown address", "src", src.String())
		return
	}
	dst, err := originalDst(tc)
	if err != nil {
		p.log.Warn("egress: no original destination", logkey.Sandbox, sb.ID, logkey.Err, err)
		return
	}
	p.serve(c, bufio.NewReaderSize(c, peekBuffer), src, sb, dst, "")
}

// serve judges and carries one connection of sb from src to dst. br reads
// c (what was read of it already included). hint names the destination
// when the sandbox's first bytes do not (a forward proxy's CONNECT
// target); dst's address may then be the zero Addr, which no rule allows,
// so only the name can be allowed and the proxy resolves it itself.
func (p *Proxy) serve(c net.Conn, br *bufio.Reader, src netip.Addr, sb *Sandbox, dst netip.AddrPort, hint string) {
	ev := audit.Event{SandboxID: sb.ID, Tenant: sb.Tenant, Proto: audit.ProtoTCP, Addr: dst.Addr(), Port: dst.Port(), Start: time.Now()}
	defer func() {
		if p.cfg.Audit != nil {
			ev.Duration = time.Since(ev.Start)
			p.cfg.Audit(ev)
		}
	}()
	f := &flow{c: c, src: src, sb: sb}
	if reason := p.track(f); reason != "" {
		ev.Reason = reason
		return
	}
	defer p.untrack(f)
	defer func() {
		if p.cut(f) {
			ev.Reason += "; closed by a policy update"
		}
	}()

	k, claimed := sniff(c, br, time.Now().Add(p.cfg.PeekTimeout))
	if claimed == "" {
		claimed = hint
	}
	switch k {
	case kindTLS:
		ev.Proto = audit.ProtoTLS
	case kindHTTP:
		ev.Proto = audit.ProtoHTTP
	}
	pr := p.ports.Load()
	if host, ok := pr.name(claimed); ok {
		// The daemon's own front door, not the internet: answered in
		// process by the ports route in every mode, mode none included
		// (docs/network-ports.md, "Ports from inside a sandbox").
		ev.Host = trim(host)
		if k != kindHTTP {
			ev.Reason = "the ports route answers plain HTTP only inside sandboxes"
			return
		}
		ev.Allowed, ev.Reason = true, "ports route"
		if !p.decided(f, plan{allow: true}, true) {
			ev.Allowed, ev.Reason = false, "the sandbox's policy changed"
			return
		}
		p.servePorts(c, br, pr, sb, &ev)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
	defer cancel()
	pl := p.decide(ctx, sb, dst, claimed)
	ev.Host, ev.Reason, ev.Allowed = pl.name, pl.reason, pl.allow
	if !pl.allow {
		if k == kindHTTP {
			refuse(c, pl.reason)
		}
		return
	}
	ev.Addr = pl.target.Addr()
	if !p.decided(f, pl, false) {
		ev.Allowed, ev.Reason = false, "the sandbox's policy changed: "+ev.Reason
		return
	}
	up, err := p.cfg.Dial(ctx, "tcp4", pl.target.String())
	if err != nil {
		ev.Reason = pl.reason + "; dial failed: " + dialError(err)
		if k == kindHTTP {
			refuse(c, "cannot reach "+pl.target.String())
		}
		return
	}
	defer up.Close()
	if !p.trackUp(f, up) {
		ev.Allowed, ev.Reason = false, "the sandbox's policy changed: "+ev.Reason
		return
	}
	prefix, _ := br.Peek(br.Buffered())
	if k == kindTLS && pl.name != "" && p.intercepts(sb, pl.name) {
		ev.Proto = audit.ProtoMITM
		p.mitm(ctx, sb, c, prefix, up, pl.name, &ev)
		return
	}
	keepAlive(c)
	keepAlive(up)
	ev.BytesUp, ev.BytesDown = splice(c, up, prefix)
}

// intercepts reports whether the proxy terminates TLS to name: only to
// inject a secret or a header there.
func (p *Proxy) intercepts(sb *Sandbox, name string) bool {
	if sb.CA == nil {
		return false
	}
	return sb.Secrets.For(name) != nil || sb.Policy.HeadersFor(name) != nil
}

// splice copies both ways until both sides are done, replaying prefix (the
// peeked bytes) upstream first. io.Copy between two TCP connections uses
// splice(2).
func splice(c, up net.Conn, prefix []byte) (upBytes, downBytes int64) {
	done := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(c, up)
		closeWrite(c)
		done <- n
	}()
	if len(prefix) > 0 {
		if n, err := up.Write(prefix); err == nil {
			upBytes += int64(n)
		}
	}
	n, _ := io.Copy(up, c)
	upBytes += n
	closeWrite(up)
	downBytes = <-done
	return upBytes, downBytes
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}

// refuse answers a plain HTTP request the proxy will not forward, so the
// program in the sandbox (and the agent reading its output) learns why.
func refuse(c net.Conn, reason string) {
	body := "sandlot: egress denied: " + reason + "\n"
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

func dialError(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// plan is the decision on one connection.
type plan struct {
	allow  bool
	reason string
	name   string // the name the decision used ("" if none)
	target netip.AddrPort
}

// decide applies the rules in the package comment.
func (p *Proxy) decide(ctx context.Context, sb *Sandbox, dst netip.AddrPort, claimed string) plan {
	port := dst.Port()
	pol := sb.Policy
	name := ""
	if claimed != "" {
		host := claimed
		if h, _, err := net.SplitHostPort(claimed); err == nil {
			host = h
		}
		if _, err := netip.ParseAddr(host); err != nil {
			if n, ok := policy.CanonicalName(host); ok {
				name = n
			} else {
				return plan{reason: "malformed name " + strconv.Quote(trim(host))}
			}
		}
	}
	if name == "" {
		// No name on the wire: the resolver's answer names the address, if
		// it gave one to this sandbox (it only answers allowed names).
		if p.cfg.Names != nil {
			name, _ = p.cfg.Names(sb.ID, dst.Addr())
		}
		d := pol.Check(policy.Dest{Name: name, Addr: dst.Addr(), Port: port}, p.cfg.Internal)
		return plan{allow: d.Allow, reason: d.Reason, name: name, target: dst}
	}
	// The sandbox's own choice of address, when the address alone is
	// allowed and the name is not denied.
	// (With the address allowed, only a deny rule can refuse the name.)
	if byAddr := pol.Check(policy.Dest{Addr: dst.Addr(), Port: port}, p.cfg.Internal); byAddr.Allow {
		d := pol.Check(policy.Dest{Name: name, Addr: dst.Addr(), Port: port}, p.cfg.Internal)
		return plan{allow: d.Allow, reason: d.Reason, name: name, target: dst}
	}
	switch {
	case pol.Mode() == policy.None:
		return plan{reason: "network mode none", name: name}
	case !pol.AllowName(name):
		// Not resolved at all: the name does not even reach the upstream
		// name server.
		return plan{reason: "name not allowed: " + name, name: name}
	}
	addrs, err := p.cfg.Resolve(ctx, name)
	if err != nil || len(addrs) == 0 {
		return plan{reason: "cannot resolve " + name, name: name}
	}
	// Prefer the address the sandbox chose, when the name has it.
	for i, a := range addrs {
		if a == dst.Addr() {
			addrs[0], addrs[i] = addrs[i], addrs[0]
			break
		}
	}
	first := ""
	for _, a := range addrs {
		d := pol.Check(policy.Dest{Name: name, Addr: a, Port: port}, p.cfg.Internal)
		if d.Allow {
			return plan{allow: true, reason: d.Reason, name: name, target: netip.AddrPortFrom(a, port)}
		}
		if first == "" {
			first = d.Reason
		}
	}
	return plan{reason: first, name: name}
}

func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
