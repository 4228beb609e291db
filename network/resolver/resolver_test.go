package resolver

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
)

// listenPair opens a TCP and a UDP socket on the same loopback port.
func listenPair(t *testing.T) (net.PacketConn, net.Listener, string) {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp4", l.Addr().String())
		if err != nil {
			l.Close()
			continue
		}
		t.Cleanup(func() { l.Close(); pc.Close() })
		return pc, l, l.Addr().String()
	}
	t.Fatal("no free port pair")
	return nil, nil, ""
}

type fixture struct {
	r        *Resolver
	addr     string
	upstream *nettest.DNS
	policy   atomic.Pointer[policy.Effective]
	known    atomic.Bool
	mu       sync.Mutex
	events   []audit.Event
}

func newFixture(t *testing.T, p policy.Policy, mod ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{upstream: &nettest.DNS{
		Zone: map[string][]string{
			"www.example.test":   {"203.0.113.10"},
			"example.test":       {"203.0.113.11"},
			"alias.example.test": {"cname:www.example.test"},
			"rebind.test":        {"10.9.9.9"},
			"mixed.test":         {"203.0.113.5", "10.9.9.9", "2001:db8::5"},
			"multi.test":         {"203.0.113.5", "198.51.100.5"},
			"elsewhere.test":     {"198.51.100.9"},
			"big.test":           {"203.0.113.77"},
			"metadata.test":      {"169.254.169.254"},
		},
		TruncateUDP: map[string]bool{"big.test": true},
	}}
	upc, ul, uaddr := listenPair(t)
	f.upstream.Serve(t, upc, ul)
	f.setPolicy(t, p)
	f.known.Store(true)
	cfg := Config{
		Upstream: []string{uaddr},
		Lookup: func(src netip.Addr) (Sandbox, bool) {
			if !f.known.Load() || src != netip.MustParseAddr("127.0.0.1") {
				return Sandbox{}, false
			}
			return Sandbox{ID: "sb-1", Tenant: "t1", Policy: f.policy.Load()}, true
		},
		Audit: func(e audit.Event) {
			f.mu.Lock()
			f.events = append(f.events, e)
			f.mu.Unlock()
		},
		Timeout: time.Second,
	}
	for _, m := range mod {
		m(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, l, addr := listenPair(t)
	r.Serve(pc, l)
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	f.r, f.addr = r, addr
	return f
}

func (f *fixture) setPolicy(t *testing.T, p policy.Policy) {
	t.Helper()
	e, err := (&policy.Operator{Default: policy.TenantCap{AllowOpen: true}}).Apply("t1", p)
	if err != nil {
		t.Fatal(err)
	}
	f.policy.Store(e)
}

func (f *fixture) ask(t *testing.T, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: network, Timeout: 3 * time.Second}
	resp, _, err := c.Exchange(q, f.addr)
	if err != nil {
		t.Fatalf("ask %s %s: %v", name, dns.TypeToString[qtype], err)
	}
	return resp
}

func answers(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch v := rr.(type) {
		case *dns.A:
			out = append(out, v.A.String())
		case *dns.AAAA:
			out = append(out, v.AAAA.String())
		case *dns.CNAME:
			out = append(out, "cname:"+strings.TrimSuffix(v.Target, "."))
		case *dns.TXT:
			out = append(out, "txt")
		}
	}
	return out
}

func TestAnswers(t *testing.T) {
	f := newFixture(t, policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{
		policy.MustRule("*.example.test"), policy.MustRule("rebind.test"), policy.MustRule("mixed.test"),
		policy.MustRule("big.test:443"), policy.MustRule("metadata.test"),
	}})
	tests := []struct {
		name     string
		network  string
		q        string
		qtype    uint16
		rcode    int
		want     []string
		upstream bool // whether the upstream is asked
	}{
		{"allowed", "udp", "www.example.test", dns.TypeA, dns.RcodeSuccess, []string{"203.0.113.10"}, true},
		{"allowed over tcp", "tcp", "www.example.test", dns.TypeA, dns.RcodeSuccess, []string{"203.0.113.10"}, true},
		{"cname chain", "udp", "alias.example.test", dns.TypeA, dns.RcodeSuccess, []string{"cname:www.example.test", "203.0.113.10"}, true},
		{"apex not under wildcard", "udp", "example.test", dns.TypeA, dns.RcodeNameError, nil, false},
		{"not allowed", "udp", "elsewhere.test", dns.TypeA, dns.RcodeNameError, nil, false},
		{"rebinding to private", "udp", "rebind.test", dns.TypeA, dns.RcodeSuccess, nil, true},
		{"metadata", "udp", "metadata.test", dns.TypeA, dns.RcodeSuccess, nil, true},
		{"private removed, public kept", "udp", "mixed.test", dns.TypeA, dns.RcodeSuccess, []string{"203.0.113.5"}, true},
		{"aaaa empty", "udp", "mixed.test", dns.TypeAAAA, dns.RcodeSuccess, nil, false},
		{"https empty", "udp", "www.example.test", dns.TypeHTTPS, dns.RcodeSuccess, nil, false},
		{"txt of an allowed name", "udp", "www.example.test", dns.TypeTXT, dns.RcodeSuccess, []string{"txt"}, true},
		{"reverse", "udp", "10.113.0.203.in-addr.arpa", dns.TypePTR, dns.RcodeNameError, nil, false},
		{"truncated upstream answer retried over tcp", "udp", "big.test", dns.TypeA, dns.RcodeSuccess, []string{"203.0.113.77"}, true},
		{"any", "udp", "www.example.test", dns.TypeANY, dns.RcodeNotImplemented, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.upstream.Queries())
			resp := f.ask(t, tt.network, tt.q, tt.qtype)
			if resp.Rcode != tt.rcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tt.rcode])
			}
			if got := answers(resp); !slices.Equal(got, tt.want) {
				t.Errorf("answers %v, want %v", got, tt.want)
			}
			if asked := len(f.upstream.Queries()) > before; asked != tt.upstream {
				t.Errorf("upstream asked: %v, want %v (%v)", asked, tt.upstream, f.upstream.Queries()[before:])
			}
		})
	}
	if name, ok := f.r.NameFor("sb-1", netip.MustParseAddr("203.0.113.10")); !ok || name != "www.example.test" && name != "alias.example.test" {
		t.Errorf("NameFor(203.0.113.10) = %q, %v", name, ok)
	}
	if _, ok := f.r.NameFor("sb-1", netip.MustParseAddr("10.9.9.9")); ok {
		t.Error("a filtered address is remembered")
	}
	if _, ok := f.r.NameFor("sb-2", netip.MustParseAddr("203.0.113.10")); ok {
		t.Error("names leak between sandboxes")
	}
	f.r.Forget("sb-1")
	if _, ok := f.r.NameFor("sb-1", netip.MustParseAddr("203.0.113.10")); ok {
		t.Error("Forget kept the names")
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	var denied, rebound bool
	for _, e := range f.events {
		if e.SandboxID != "sb-1" || e.Tenant != "t1" || e.Proto != audit.ProtoDNS {
			t.Errorf("event %+v", e)
		}
		denied = denied || (e.Host == "elsewhere.test" && !e.Allowed && e.Reason == "name not allowed")
		rebound = rebound || (e.Host == "rebind.test" && strings.Contains(e.Reason, "forbidden"))
	}
	if !denied || !rebound {
		t.Errorf("audit events miss the denial (%v) or the rebinding (%v): %+v", denied, rebound, f.events)
	}
}

func TestAddressRulesDoNotOpenNames(t *testing.T) {
	// An allowlist of addresses does not let names through: a question is
	// itself a message to whoever serves the name (DNS exfiltration).
	f := newFixture(t, policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{policy.MustRule("203.0.113.0/24")}})
	if resp := f.ask(t, "udp", "multi.test", dns.TypeA); resp.Rcode != dns.RcodeNameError {
		t.Errorf("multi.test: %s, want NXDOMAIN", dns.RcodeToString[resp.Rcode])
	}
	if q := f.upstream.Queries(); len(q) != 0 {
		t.Errorf("the upstream was asked %v", q)
	}
}

func TestOpenAndNone(t *testing.T) {
	f := newFixture(t, policy.Policy{Mode: policy.Open, Deny: []policy.Rule{policy.MustRule("*.example.test"), policy.MustRule("198.51.100.0/24")}})
	if got := answers(f.ask(t, "udp", "multi.test", dns.TypeA)); !slices.Equal(got, []string{"203.0.113.5"}) {
		t.Errorf("open, multi.test: %v (the denied range must be filtered)", got)
	}
	if resp := f.ask(t, "udp", "www.example.test", dns.TypeA); resp.Rcode != dns.RcodeNameError {
		t.Errorf("open, denied name: %s", dns.RcodeToString[resp.Rcode])
	}
	f.setPolicy(t, policy.Policy{})
	if resp := f.ask(t, "udp", "multi.test", dns.TypeA); resp.Rcode != dns.RcodeNameError {
		t.Errorf("mode none: %s", dns.RcodeToString[resp.Rcode])
	}
	f.known.Store(false)
	if resp := f.ask(t, "udp", "multi.test", dns.TypeA); resp.Rcode != dns.RcodeRefused {
		t.Errorf("unknown source: %s, want REFUSED", dns.RcodeToString[resp.Rcode])
	}
}

// TestBlockedSaysWhy: a name the policy does not answer comes back
// NXDOMAIN with an extended error (RFC 8914, Blocked) saying it is the
// sandbox's network policy, to a client that speaks EDNS; one that does
// not gets the bare NXDOMAIN.
func TestBlockedSaysWhy(t *testing.T) {
	f := newFixture(t, policy.Policy{})
	ede := func(edns bool) *dns.EDNS0_EDE {
		t.Helper()
		q := new(dns.Msg)
		q.SetQuestion("multi.test.", dns.TypeA)
		if edns {
			q.SetEdns0(1232, false)
		}
		resp, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(q, f.addr)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Rcode != dns.RcodeNameError {
			t.Fatalf("rcode %s", dns.RcodeToString[resp.Rcode])
		}
		if opt := resp.IsEdns0(); opt != nil {
			for _, o := range opt.Option {
				if e, ok := o.(*dns.EDNS0_EDE); ok {
					return e
				}
			}
		}
		return nil
	}
	cases := []struct {
		name string
		p    policy.Policy
		want string
	}{
		{"none", policy.Policy{}, "sandlot: this sandbox has no internet access (network mode none); multi.test is not resolved"},
		{"allowlist", policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{policy.MustRule("www.example.test")}}, "sandlot: multi.test is not in this sandbox's network allowlist"},
		{"open with a deny rule", policy.Policy{Mode: policy.Open, Deny: []policy.Rule{policy.MustRule("multi.test")}}, "sandlot: multi.test is denied by this sandbox's network policy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.setPolicy(t, c.p)
			e := ede(true)
			if e == nil || e.InfoCode != dns.ExtendedErrorCodeBlocked || e.ExtraText != c.want {
				t.Errorf("extended error %v, want Blocked %q", e, c.want)
			}
			if e := ede(false); e != nil {
				t.Errorf("a client without EDNS got %v", e)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	f := newFixture(t, policy.Policy{Mode: policy.Open})
	q := new(dns.Msg)
	q.SetQuestion("a.test.", dns.TypeA)
	q.Question = append(q.Question, dns.Question{Name: "b.test.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	resp, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(q, f.addr)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Rcode != dns.RcodeFormatError {
		t.Errorf("two questions: %s", dns.RcodeToString[resp.Rcode])
	}
	if resp := f.ask(t, "udp", "-bad-.test", dns.TypeA); resp.Rcode == dns.RcodeSuccess {
		t.Errorf("bad name answered: %v", resp)
	}
}

func TestLookupIPCaches(t *testing.T) {
	f := newFixture(t, policy.Policy{})
	ctx := context.Background()
	for range 3 {
		got, err := f.r.LookupIP(ctx, "WWW.example.test.")
		if err != nil || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("203.0.113.10")}) {
			t.Fatalf("LookupIP = %v, %v", got, err)
		}
	}
	n := 0
	for _, q := range f.upstream.Queries() {
		if q == "www.example.test A" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("upstream asked %d times, want 1 (cached)", n)
	}
	if _, err := f.r.LookupIP(ctx, "nope.test"); err == nil {
		t.Error("LookupIP of an unknown name succeeded")
	}
}

func TestUpstreamDown(t *testing.T) {
	pc, l, addr := listenPair(t)
	pc.Close()
	l.Close()
	e := &policy.Effective{Policy: policy.Policy{Mode: policy.Open}}
	r, err := New(Config{Upstream: []string{addr}, Timeout: 200 * time.Millisecond,
		Lookup: func(netip.Addr) (Sandbox, bool) { return Sandbox{ID: "x", Policy: e}, true }})
	if err != nil {
		t.Fatal(err)
	}
	spc, sl, saddr := listenPair(t)
	r.Serve(spc, sl)
	defer r.Shutdown(context.Background())
	q := new(dns.Msg)
	q.SetQuestion("www.example.test.", dns.TypeA)
	resp, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(q, saddr)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Rcode != dns.RcodeServerFailure {
		t.Errorf("upstream down: %s, want SERVFAIL", dns.RcodeToString[resp.Rcode])
	}
}

// TestPortsDomain: names of the ports route are the gateway's, for every
// sandbox whatever its policy (mode none too), answered without asking
// upstream (which has another address for one of them); other names under
// the domain, or the domain itself, are not.
func TestPortsDomain(t *testing.T) {
	f := newFixture(t, policy.Policy{})
	f.upstream.Zone["8000-sb-a.sandlot.test"] = []string{"203.0.113.99"}
	if resp := f.ask(t, "udp", "8000-sb-a.sandlot.test", dns.TypeA); resp.Rcode != dns.RcodeNameError {
		t.Errorf("before SetPorts, mode none: %s %v", dns.RcodeToString[resp.Rcode], answers(resp))
	}
	f.r.SetPorts("Sandlot.Test.", netip.MustParseAddr("10.254.0.1"))
	for _, p := range []policy.Policy{{}, {Mode: policy.Allowlist, Allow: []policy.Rule{policy.MustRule("www.example.test")}}, {Mode: policy.Open}} {
		f.setPolicy(t, p)
		tests := []struct {
			name  string
			qtype uint16
			rcode int
			want  []string
		}{
			{"8000-sb-a.sandlot.test", dns.TypeA, dns.RcodeSuccess, []string{"10.254.0.1"}},
			{"6080-SB-B.sandlot.test.", dns.TypeA, dns.RcodeSuccess, []string{"10.254.0.1"}},
			{"8000-sb-a.sandlot.test", dns.TypeAAAA, dns.RcodeSuccess, nil},
			{"a.b.sandlot.test", dns.TypeA, dns.RcodeNameError, nil},
			{"sandlot.test", dns.TypeA, dns.RcodeNameError, nil},
		}
		if p.Mode == policy.Open {
			// Mode open asks upstream for the rest, which knows neither.
			tests = tests[:3]
		}
		for _, tt := range tests {
			resp := f.ask(t, "udp", tt.name, tt.qtype)
			if resp.Rcode != tt.rcode || !slices.Equal(answers(resp), tt.want) {
				t.Errorf("mode %q, %s %s: %s %v, want %s %v", p.Mode, tt.name, dns.TypeToString[tt.qtype],
					dns.RcodeToString[resp.Rcode], answers(resp), dns.RcodeToString[tt.rcode], tt.want)
			}
		}
	}
}

// TestRateLimit: a sandbox asks its burst of questions, then gets
// REFUSED at once, without its question going upstream, and the refusal
// is reported; a forgotten sandbox starts over.
func TestRateLimit(t *testing.T) {
	f := newFixture(t, policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{policy.MustRule("www.example.test")}},
		func(c *Config) { c.Rate, c.Burst = 0.001, 5 }) // no token refills during the test
	for i := range 5 {
		if m := f.ask(t, "udp", "www.example.test", dns.TypeA); m.Rcode != dns.RcodeSuccess {
			t.Fatalf("question %d within the burst: %s", i, dns.RcodeToString[m.Rcode])
		}
	}
	upstream := len(f.upstream.Queries())
	for range 20 {
		if m := f.ask(t, "udp", "www.example.test", dns.TypeA); m.Rcode != dns.RcodeRefused {
			t.Fatalf("a question past the rate: %s, want REFUSED", dns.RcodeToString[m.Rcode])
		}
	}
	if n := len(f.upstream.Queries()); n != upstream {
		t.Errorf("questions past the rate went upstream: %d more", n-upstream)
	}
	f.mu.Lock()
	last := f.events[len(f.events)-1]
	f.mu.Unlock()
	if last.Allowed || !strings.Contains(last.Reason, "rate limited") || last.SandboxID != "sb-1" {
		t.Errorf("the refusal's event: %+v", last)
	}
	f.r.Forget("sb-1")
	if m := f.ask(t, "udp", "www.example.test", dns.TypeA); m.Rcode != dns.RcodeSuccess {
		t.Errorf("after Forget: %s", dns.RcodeToString[m.Rcode])
	}
}
