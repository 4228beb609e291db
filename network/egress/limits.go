package egress

import (
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/network/policy"
)

// Legs is what one connection costs in Limits: the sandbox's descriptor
// and the one the proxy opens for it (upstream, or the ports route's to
// its target). Both are counted from accept to close, so a connection
// still peeking or dialling costs as much as one that is spliced.
const Legs = 2

// Limits bound the descriptors the proxy holds. Descriptors and the
// memory behind them (93 KiB for a held ports-route request) are
// a resource every tenant reaches, so a tenant gets a share of them, and
// the proxy leaves room for the rest of the daemon (docs/security.md).
// Zero fields take the defaults below, computed from the process's
// RLIMIT_NOFILE (soft) when the proxy is made.
type Limits struct {
	// PerSandbox bounds one sandbox's descriptors (default 1024, that is
	// 512 connections, or PerTenant when that is lower).
	PerSandbox int
	// PerTenant bounds the descriptors of all of a tenant's sandboxes
	// together (default Total/4: no tenant fills the proxy alone).
	PerTenant int
	// Total bounds the proxy's descriptors (default half of RLIMIT_NOFILE,
	// at most 8192).
	Total int
	// Watermark: a connection accepted while the process holds this many
	// descriptors of any kind (the front door's, the store's, the
	// runtime's) is closed at once, so the daemon keeps room for its other
	// work (default 7/8 of RLIMIT_NOFILE).
	Watermark int
}

// DefaultMaxTotal caps the default Limits.Total: 4096 connections, about
// 370 MiB if every one is a held ports-route request.
const DefaultMaxTotal = 8192

// withDefaults fills zero fields for a process allowed nofile
// descriptors.
func (l Limits) withDefaults(nofile int) Limits {
	if l.Watermark <= 0 {
		l.Watermark = nofile - nofile/8
	}
	if l.Total <= 0 {
		l.Total = min(nofile/2, DefaultMaxTotal)
	}
	if l.PerTenant <= 0 {
		l.PerTenant = l.Total / 4
	}
	if l.PerSandbox <= 0 {
		l.PerSandbox = min(1024, l.PerTenant)
	}
	return l
}

// nofile is the process's soft RLIMIT_NOFILE (the Go runtime raises it
// to the hard limit at start); 1024 when it cannot be read, or is
// unlimited.
func nofile() int {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur == unix.RLIM_INFINITY || r.Cur > 1<<30 {
		return 1024
	}
	return int(r.Cur)
}

// flow is one connection the proxy holds.
type flow struct {
	c   net.Conn // the sandbox's side
	src netip.Addr
	sb  *Sandbox // the registration it was accepted under

	// Under Proxy.mu:
	up      net.Conn // the upstream side, once dialled
	done    bool     // decided (allowed) and checked against the registry
	ports   bool     // answered by the ports route
	rechk   policy.Dest
	dropped bool // closed by a policy change
}

func (f *flow) close() {
	f.c.Close()
	if f.up != nil {
		f.up.Close()
	}
}

// fdOf is the descriptor number of c, -1 if it has none.
func fdOf(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	rc.Control(func(fd uintptr) { n = int(fd) })
	return n
}

// track admits f under the limits, or says why not. The kernel hands out
// the lowest free descriptor, so a connection numbered at or above the
// watermark means at least that many are open: the process is short of
// descriptors, whoever holds them.
func (p *Proxy) track(f *flow) string {
	lim := p.cfg.Limits
	fd := fdOf(f.c)
	p.mu.Lock()
	defer p.mu.Unlock()
	tenant, id := f.sb.Tenant, f.sb.ID
	switch {
	case p.closed:
		return "the proxy is closing"
	case fd >= lim.Watermark:
		if time.Since(p.shed) > time.Minute {
			p.shed = time.Now()
			p.log.Warn("egress: the daemon is short of descriptors; refusing new connections", "open", fd, "watermark", lim.Watermark)
		}
		return "the daemon is short of descriptors"
	case p.total+Legs > lim.Total:
		return "too many connections on this daemon"
	case p.tenants[tenant]+Legs > lim.PerTenant:
		return "too many connections of this tenant"
	case p.counts[id]+Legs > lim.PerSandbox:
		return "too many connections"
	}
	p.flows[f.c] = f
	p.total += Legs
	p.tenants[tenant] += Legs
	p.counts[id] += Legs
	return ""
}

func (p *Proxy) untrack(f *flow) {
	tenant, id := f.sb.Tenant, f.sb.ID
	p.mu.Lock()
	delete(p.flows, f.c)
	p.total -= Legs
	if p.tenants[tenant] -= Legs; p.tenants[tenant] <= 0 {
		delete(p.tenants, tenant)
	}
	if p.counts[id] -= Legs; p.counts[id] <= 0 {
		delete(p.counts, id)
	}
	p.mu.Unlock()
}

// decided records that f was allowed under pl (ports: answered by the
// ports route) and reports whether the sandbox's registration still
// allows it: a policy update between the decision and now is not missed
// (Recheck skips undecided flows).
func (p *Proxy) decided(f *flow, pl plan, ports bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	f.done, f.ports = true, ports
	f.rechk = policy.Dest{Name: pl.name, Addr: pl.target.Addr(), Port: pl.target.Port()}
	return p.allowedNow(f)
}

// trackUp ties the upstream side to f, so Close and Recheck close it
// too; false when f was cut meanwhile.
func (p *Proxy) trackUp(f *flow, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.dropped || p.closed {
		return false
	}
	f.up = up
	return true
}

// cut reports whether Recheck closed f.
func (p *Proxy) cut(f *flow) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return f.dropped
}

// allowedNow reports whether f's sandbox, as registered now, still
// allows it. Caller holds p.mu.
func (p *Proxy) allowedNow(f *flow) bool {
	cur, ok := p.reg.Lookup(f.src)
	if !ok || cur.ID != f.sb.ID || cur.Policy == nil {
		return false
	}
	if cur == f.sb {
		return true
	}
	if f.ports {
		// The route was answered for a caller with or without internet
		// access (ports.Caller); a caller that lost it keeps nothing it
		// got through it. Later requests are judged as they come.
		return cur.Policy.Mode() == policy.Open || f.sb.Policy.Mode() != policy.Open
	}
	return cur.Policy.Check(f.rechk, p.cfg.Internal).Allow
}

// Recheck judges the connections of sandboxID against its registration
// as it is now, and closes those its new policy (or its removal) no
// longer allows: a stricter policy takes effect on open connections too,
// not only on the next ones. Call it after changing the registry.
func (p *Proxy) Recheck(sandboxID string) {
	var cut []*flow
	p.mu.Lock()
	for _, f := range p.flows {
		if f.sb.ID == sandboxID && f.done && !f.dropped && !p.allowedNow(f) {
			f.dropped = true
			cut = append(cut, f)
		}
	}
	p.mu.Unlock()
	for _, f := range cut {
		p.log.Info("egress: a policy change cut a connection", "sandbox", f.sb.ID, "host", f.rechk.Name, "addr", f.rechk.Addr.String())
		f.close()
	}
}
