// Package resolver is the name server every sandbox's DNS is redirected
// to. It answers a sandbox only the names its policy allows (NXDOMAIN
// otherwise), by asking the host's upstream name servers, and removes
// from the answers every address the sandbox may not reach (so an
// allowed name that resolves to a private address, DNS rebinding, gets an
// empty answer). It remembers which name it answered for which address,
// per sandbox, so the egress proxy can name a connection that carries no
// SNI or Host header; and it resolves names for the proxy itself.
//
// The sandbox network is IPv4: AAAA questions get an empty answer, and so
// do HTTPS/SVCB questions (their address hints would bypass the filter).
// Reverse lookups get NXDOMAIN: they would name internal hosts.
package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/time/rate"

	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/policy"
)

// Sandbox is what the resolver needs to know of the sandbox at an address.
type Sandbox struct {
	ID, Tenant string
	Policy     *policy.Effective
}

// Config configures a Resolver. Lookup is required.
type Config struct {
	// Lookup finds the sandbox a query comes from by its source address.
	Lookup func(src netip.Addr) (Sandbox, bool)
	// Upstream lists the name servers ("ip:port") to forward to, tried in
	// order. Default: the nameserver lines of /etc/resolv.conf.
	Upstream []string
	// Internal names the daemon's internal addresses (host, pool), which
	// are removed from answers like the forbidden ranges.
	Internal policy.Internal
	// Audit receives one event per question (nil: none).
	Audit audit.Func
	// Timeout bounds one upstream exchange (default 2s).
	Timeout time.Duration
	// Rate is how many questions a second one sandbox may ask, in bursts
	// of Burst; past it questions are answered REFUSED without any other
	// work (0: DefaultRate and DefaultBurst; negative: no limit). A
	// sandbox's flood must cost its own lookups, not the daemon's name
	// server, the upstream servers and the audit trail that every tenant
	// shares.
	Rate  float64
	Burst int
	Log   *slog.Logger
}

// Default question rate of a sandbox: far above what programs ask (a
// resolver library caches), far below a flood.
const (
	DefaultRate  = 200
	DefaultBurst = 1000
)

// TTL bounds: answers to sandboxes live at most maxTTL, so a policy change
// takes effect within that; names are remembered for the proxy at least
// minRemember, since programs cache answers longer than their TTL.
const (
	maxTTL        = 300
	minRemember   = 10 * time.Minute
	maxNames      = 4096 // remembered addresses per sandbox
	maxCache      = 10000
	minCacheTTL   = 5 * time.Second
	maxCacheTTL   = 5 * time.Minute
	udpBufferSize = 1232
)

// Resolver answers sandboxes' questions. Its methods are safe for
// concurrent use.
type Resolver struct {
	cfg    Config
	log    *slog.Logger
	client *dns.Client
	tcp    *dns.Client

	ports atomic.Pointer[portsRoute] // SetPorts; nil: none
	rate  rate.Limit

	mu    sync.Mutex
	limit map[string]*rate.Limiter             // sandbox → its question rate
	names map[string]map[netip.Addr]remembered // sandbox → address → name
	cache map[string]cached                    // name → A records, for the proxy

	servers []*dns.Server
}

type remembered struct {
	name    string
	expires time.Time
}

type cached struct {
	addrs   []netip.Addr
	err     error
	expires time.Time
}

// New returns a Resolver.
func New(cfg Config) (*Resolver, error) {
	if cfg.Lookup == nil {
		return nil, errors.New("resolver: Lookup is required")
	}
	if len(cfg.Upstream) == 0 {
		cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil {
			return nil, fmt.Errorf("resolver: no upstream and no /etc/resolv.conf: %w", err)
		}
		for _, s := range cc.Servers {
			cfg.Upstream = append(cfg.Upstream, net.JoinHostPort(s, cc.Port))
		}
	}
	if len(cfg.Upstream) == 0 {
		return nil, errors.New("resolver: no upstream name server")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	r := rate.Limit(cfg.Rate)
	switch {
	case cfg.Rate == 0:
		r = DefaultRate
	case cfg.Rate < 0:
		r = rate.Inf
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	return &Resolver{
		rate:  r,
		limit: map[string]*rate.Limiter{},
		cfg:   cfg, log: cfg.Log,
		client: &dns.Client{Net: "udp", Timeout: cfg.Timeout, UDPSize: udpBufferSize},
		tcp:    &dns.Client{Net: "tcp", Timeout: cfg.Timeout},
		names:  map[string]map[netip.Addr]remembered{},
		cache:  map[string]cached{},
	}, nil
}

// Serve answers on pc (UDP) and l (TCP) until Shutdown. Either may be nil.
func (r *Resolver) Serve(pc net.PacketConn, l net.Listener) {
	var started sync.WaitGroup
	start := func(s *dns.Server) {
		started.Add(1)
		s.NotifyStartedFunc = started.Done
		r.servers = append(r.servers, s)
		go func() {
			if err := s.ActivateAndServe(); err != nil {
				r.log.Warn("resolver: server stopped", logkey.Err, err)
			}
		}()
	}
	if pc != nil {
		start(&dns.Server{PacketConn: pc, Handler: r, UDPSize: udpBufferSize})
	}
	if l != nil {
		start(&dns.Server{Listener: l, Handler: r, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, MaxTCPQueries: 64})
	}
	started.Wait()
}

// Shutdown stops the servers started by Serve.
func (r *Resolver) Shutdown(ctx context.Context) error {
	var errs []error
	for _, s := range r.servers {
		errs = append(errs, s.ShutdownContext(ctx))
	}
	return errors.Join(errs...)
}

// Forget drops what the resolver remembers of a sandbox (at teardown).
func (r *Resolver) Forget(sandboxID string) {
	r.mu.Lock()
	delete(r.names, sandboxID)
	delete(r.limit, sandboxID)
	r.mu.Unlock()
}

// allow takes one question of a sandbox's rate.
func (r *Resolver) allow(sandboxID string) bool {
	r.mu.Lock()
	l := r.limit[sandboxID]
	if l == nil {
		l = rate.NewLimiter(r.rate, r.cfg.Burst)
		r.limit[sandboxID] = l
	}
	r.mu.Unlock()
	return l.Allow()
}

// NameFor returns the name the resolver last answered a for, to this
// sandbox.
func (r *Resolver) NameFor(sandboxID string, a netip.Addr) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.names[sandboxID][a.Unmap()]
	if !ok || time.Now().After(e.expires) {
		return "", false
	}
	return e.name, true
}

func (r *Resolver) remember(sandboxID, name string, addrs []netip.Addr, ttl uint32) {
	exp := time.Now().Add(max(time.Duration(ttl)*time.Second, minRemember))
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.names[sandboxID]
	if m == nil {
		m = map[netip.Addr]remembered{}
		r.names[sandboxID] = m
	}
	if len(m)+len(addrs) > maxNames {
		now := time.Now()
		for a, e := range m {
			if now.After(e.expires) || len(m)+len(addrs) > maxNames {
				delete(m, a)
			}
		}
	}
	for _, a := range addrs {
		m[a] = remembered{name, exp}
	}
}

// LookupIP returns the IPv4 addresses of name from the upstream servers,
// cached by TTL (within [5s, 5m]). The proxy uses it to dial the address
// of the name a connection claims, never the address the sandbox chose.
func (r *Resolver) LookupIP(ctx context.Context, name string) ([]netip.Addr, error) {
	name, ok := policy.CanonicalName(name)
	if !ok {
		return nil, fmt.Errorf("resolver: bad name")
	}
	now := time.Now()
	r.mu.Lock()
	c, ok := r.cache[name]
	r.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.addrs, c.err
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	resp, err := r.exchange(ctx, q)
	var addrs []netip.Addr
	ttl := uint32(maxCacheTTL / time.Second)
	if err == nil && resp.Rcode != dns.RcodeSuccess {
		err = fmt.Errorf("resolver: %s: %s", name, dns.RcodeToString[resp.Rcode])
	}
	if err == nil {
		for _, rr := range resp.Answer {
			if a, ok := rr.(*dns.A); ok {
				if ip, ok := netip.AddrFromSlice(a.A); ok {
					addrs = append(addrs, ip.Unmap())
					ttl = min(ttl, a.Hdr.Ttl)
				}
			}
		}
		if len(addrs) == 0 {
			err = fmt.Errorf("resolver: %s has no IPv4 address", name)
		}
	}
	exp := now.Add(min(max(time.Duration(ttl)*time.Second, minCacheTTL), maxCacheTTL))
	if err != nil {
		exp = now.Add(minCacheTTL)
	}
	r.mu.Lock()
	if len(r.cache) >= maxCache {
		for k, v := range r.cache {
			if now.After(v.expires) || len(r.cache) >= maxCache {
				delete(r.cache, k)
			}
		}
	}
	r.cache[name] = cached{addrs, err, exp}
	r.mu.Unlock()
	return addrs, err
}

// exchange asks the upstream servers in order, over TCP when an answer is
// truncated.
func (r *Resolver) exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	q.RecursionDesired = true
	q.SetEdns0(udpBufferSize, false)
	var last error
	for _, up := range r.cfg.Upstream {
		resp, _, err := r.client.ExchangeContext(ctx, q, up)
		if err == nil && resp.Truncated {
			resp, _, err = r.tcp.ExchangeContext(ctx, q, up)
		}
		if err == nil && resp.Rcode != dns.RcodeServerFailure && resp.Rcode != dns.RcodeRefused {
			return resp, nil
		}
		if err == nil {
			err = fmt.Errorf("upstream %s: %s", up, dns.RcodeToString[resp.Rcode])
		}
		last = err
	}
	return nil, last
}

// ServeDNS answers one question of a sandbox.
func (r *Resolver) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	ev := audit.Event{Proto: audit.ProtoDNS, Start: start}
	// why, when set, tells a client that speaks EDNS why its name was not
	// answered (RFC 8914 extended error "Blocked"; dig prints it), so a
	// process or a model in the sandbox learns it is the policy, not the
	// name.
	var why string
	defer func() {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
			m.SetEdns0(udpBufferSize, false)
			if why != "" {
				o := m.IsEdns0()
				o.Option = append(o.Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeBlocked, ExtraText: why})
			}
		}
		if _, tcp := w.RemoteAddr().(*net.TCPAddr); tcp {
			size = dns.MaxMsgSize
		}
		m.Truncate(size)
		w.WriteMsg(m)
		if r.cfg.Audit != nil && ev.SandboxID != "" {
			ev.Duration = time.Since(start)
			r.cfg.Audit(ev)
		}
	}()
	src, ok := addrOf(w.RemoteAddr())
	var sb Sandbox
	if ok {
		sb, ok = r.cfg.Lookup(src)
	}
	if !ok || sb.Policy == nil {
		m.Rcode = dns.RcodeRefused
		return
	}
	ev.SandboxID, ev.Tenant = sb.ID, sb.Tenant
	if !r.allow(sb.ID) {
		m.Rcode = dns.RcodeRefused
		ev.Reason = "rate limited: the sandbox asks too many questions"
		return
	}
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeFormatError
		ev.Reason = "malformed question"
		return
	}
	q := req.Question[0]
	name, valid := policy.CanonicalName(q.Name)
	if !valid || q.Qclass != dns.ClassINET {
		m.Rcode = dns.RcodeNameError
		ev.Reason = "not a host name"
		return
	}
	ev.Host = name
	switch {
	case strings.HasSuffix(name, ".in-addr.arpa") || strings.HasSuffix(name, ".ip6.arpa"):
		m.Rcode = dns.RcodeNameError
		ev.Reason = "reverse lookups are not answered"
		return
	case r.answerPorts(m, q, name):
		// The daemon's own ports route, in every mode (mode none too):
		// answered here, never asked upstream.
		ev.Allowed, ev.Reason = true, "ports route"
		return
	case !sb.Policy.AllowName(name):
		// Never forwarded: a question for a name outside the allowlist is
		// itself a way out (to whoever serves that name).
		m.Rcode = dns.RcodeNameError
		ev.Reason = "name not allowed"
		why = blockedText(sb.Policy.Mode(), name)
		return
	case q.Qtype == dns.TypeANY:
		m.Rcode = dns.RcodeNotImplemented
		ev.Reason = "ANY is not answered"
		return
	case q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeHTTPS || q.Qtype == dns.TypeSVCB:
		ev.Allowed, ev.Reason = true, "empty: the sandbox network is IPv4"
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout*time.Duration(len(r.cfg.Upstream)))
	defer cancel()
	up := new(dns.Msg)
	up.SetQuestion(dns.Fqdn(name), q.Qtype)
	resp, err := r.exchange(ctx, up)
	if err != nil {
		m.Rcode = dns.RcodeServerFailure
		ev.Reason = "upstream failed"
		r.log.Debug("resolver: upstream failed", logkey.Sandbox, sb.ID, logkey.Err, err)
		return
	}
	m.Rcode = resp.Rcode
	var kept []netip.Addr
	dropped := 0
	ttl := uint32(maxTTL)
	for _, rr := range resp.Answer {
		h := rr.Header()
		h.Ttl = min(h.Ttl, maxTTL)
		switch v := rr.(type) {
		case *dns.A:
			ip, _ := netip.AddrFromSlice(v.A)
			ip = ip.Unmap()
			if !r.answerable(sb.Policy, ip) {
				dropped++
				continue
			}
			kept = append(kept, ip)
			ttl = min(ttl, h.Ttl)
			m.Answer = append(m.Answer, rr)
		case *dns.AAAA:
			// IPv4 network; never returned.
		default:
			m.Answer = append(m.Answer, rr)
		}
	}
	ev.Allowed, ev.Reason = true, "name allowed"
	if dropped > 0 && len(kept) == 0 {
		ev.Reason = "every address is forbidden; answered empty"
	}
	if len(kept) > 0 {
		r.remember(sb.ID, name, kept, ttl)
	}
}

// answerable reports whether ip may be handed to the sandbox.
func (r *Resolver) answerable(p *policy.Effective, ip netip.Addr) bool {
	if !p.CheckAddr(ip, r.cfg.Internal).Allow {
		return false
	}
	for _, n := range p.DenyNets() {
		if n.Contains(ip) {
			return false
		}
	}
	return true
}

func addrOf(a net.Addr) (netip.Addr, bool) {
	switch v := a.(type) {
	case *net.UDPAddr:
		ip, ok := netip.AddrFromSlice(v.IP)
		return ip.Unmap(), ok
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(v.IP)
		return ip.Unmap(), ok
	}
	return netip.Addr{}, false
}

// portsRoute is the ports domain and the address (the gateway) where the
// egress proxy answers it.
type portsRoute struct {
	domain string
	addr   netip.Addr
}

// SetPorts makes the resolver answer every name <label>.<domain> (the
// ports route's <port>-<id>.<domain>) with addr, the gateway where the
// egress proxy serves the route, for every sandbox whatever its policy.
// Call it before Serve.
func (r *Resolver) SetPorts(domain string, addr netip.Addr) {
	d, ok := policy.CanonicalName(domain)
	if !ok || !addr.Is4() {
		r.ports.Store(nil)
		return
	}
	r.ports.Store(&portsRoute{domain: d, addr: addr})
}

// answerPorts answers q into m when name is under the ports domain: the
// gateway for A, empty for the rest (the network is IPv4).
func (r *Resolver) answerPorts(m *dns.Msg, q dns.Question, name string) bool {
	pr := r.ports.Load()
	if pr == nil {
		return false
	}
	if _, _, ok := policy.OneLabelUnder(name, pr.domain); !ok {
		return false
	}
	if q.Qtype == dns.TypeA {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: maxTTL},
			A:   pr.addr.AsSlice(),
		})
	}
	return true
}

// blockedText says why the sandbox's policy does not answer name, in the
// extended error of the answer.
func blockedText(mode policy.Mode, name string) string {
	switch mode {
	case policy.None:
		return "sandlot: this sandbox has no internet access (network mode none); " + name + " is not resolved"
	case policy.Allowlist:
		return "sandlot: " + name + " is not in this sandbox's network allowlist"
	}
	return "sandlot: " + name + " is denied by this sandbox's network policy"
}
