package egress

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/resolver"
	"github.com/sandlot/sandlot/network/secret"
)

func TestMain(m *testing.M) { nettest.Main(m) }

// env is the whole egress path on this host: a fake internet, the
// network manager, the resolver and the proxy, wired as the daemon wires
// them.
type env struct {
	world *nettest.World
	m     *network.Manager
	reg   *Registry
	res   *resolver.Resolver
	px    *Proxy
	op    *policy.Operator
	logs  *testenv.Buffer

	mu     sync.Mutex
	events []audit.Event
}

func newEnv(t testing.TB, mut ...func(*Config)) *env {
	t.Helper()
	nettest.Require(t)
	ctx := context.Background()
	e := &env{world: nettest.NewWorld(t), reg: NewRegistry(), logs: &testenv.Buffer{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.op = &policy.Operator{
		Default: policy.TenantCap{AllowOpen: true},
		Tenants: map[string]policy.TenantCap{"internal": {Reachable: []netip.Prefix{netip.MustParsePrefix("10.9.9.9/32")}}},
	}
	m, err := network.New(network.Config{StateDir: t.TempDir(), NetnsDir: t.TempDir(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Purge(ctx) })
	e.m = m
	auditf := func(ev audit.Event) {
		e.mu.Lock()
		e.events = append(e.events, ev)
		e.mu.Unlock()
	}
	e.res, err = resolver.New(resolver.Config{
		Lookup: func(src netip.Addr) (resolver.Sandbox, bool) {
			sb, ok := e.reg.Lookup(src)
			if !ok {
				return resolver.Sandbox{}, false
			}
			return resolver.Sandbox{ID: sb.ID, Tenant: sb.Tenant, Policy: sb.Policy}, true
		},
		Upstream: []string{nettest.DNSAddr.String()},
		Internal: m.Internal,
		Audit:    auditf,
		Log:      log,
	})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := netns.ListenPacket(ctx, "", "udp4", m.DNSAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	dl, err := netns.Listen(ctx, "", "tcp4", m.DNSAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	e.res.Serve(pc, dl)
	t.Cleanup(func() { e.res.Shutdown(ctx) })
	cfg := Config{
		Resolve:  e.res.LookupIP,
		Names:    e.res.NameFor,
		Internal: m.Internal,
		RootCAs:  e.world.CA,
		Audit:    auditf,
		Log:      log,
	}
	for _, f := range mut {
		f(&cfg)
	}
	e.px, err = New(e.reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := netns.Listen(ctx, "", "tcp4", m.ProxyAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	go e.px.Serve(pl)
	t.Cleanup(func() { pl.Close(); e.px.Close() })
	return e
}

// sandbox is one sandbox's network plus the trust store its programs use:
// the world's CA (standing for the public CAs) and its own.
type sandbox struct {
	*network.Net
	trust string
}

func (e *env) sandbox(t testing.TB, id, tenant string, p policy.Policy, secrets ...secret.Secret) *sandbox {
	t.Helper()
	eff, err := e.op.Apply(tenant, p)
	if err != nil {
		t.Fatal(err)
	}
	set, err := secret.NewSet(secrets)
	if err != nil {
		t.Fatal(err)
	}
	n, err := e.m.Setup(context.Background(), id, eff)
	if err != nil {
		t.Fatal(err)
	}
	e.reg.Register(n.Addr, &Sandbox{ID: id, Tenant: tenant, Policy: eff, Secrets: set, CA: n.CA})
	t.Cleanup(func() {
		e.reg.Unregister(n.Addr)
		e.res.Forget(id)
		e.m.Teardown(context.Background(), id)
	})
	trust := filepath.Join(t.TempDir(), "trust.pem")
	if err := os.WriteFile(trust, append(append([]byte{}, e.world.CAPEM...), n.CA.CertPEM()...), 0o644); err != nil {
		t.Fatal(err)
	}
	return &sandbox{Net: n, trust: trust}
}

// curl runs curl in the sandbox and returns the status code ("000" when
// there was no HTTP answer), the body and the raw result.
func (s *sandbox) curl(t testing.TB, args ...string) (string, string, nettest.Result) {
	t.Helper()
	full := append([]string{"-sS", "--max-time", "10", "--cacert", s.trust, "-o", "-", "-w", "\n%{http_code}"}, args...)
	r := nettest.Run(t, s.Path, s.ResolvConf(), "curl", full...)
	out := strings.TrimRight(r.Stdout, "\n")
	i := strings.LastIndex(out, "\n")
	if i < 0 {
		return out, "", r
	}
	return out[i+1:], out[:i], r
}

// dial opens a TCP connection from inside the sandbox.
func (s *sandbox) dial(t testing.TB, addr string) (net.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return netns.Dialer(s.Path)(ctx, "tcp4", addr)
}

// echo sends a line over a raw TCP connection from the sandbox and
// reports whether it came back.
func (s *sandbox) echo(t testing.TB, addr string) bool {
	t.Helper()
	c, err := s.dial(t, addr)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	buf := make([]byte, 5)
	n, _ := c.Read(buf)
	return string(buf[:n]) == "ping\n"
}

// udpEcho sends a datagram from the sandbox and reports whether it came back.
func (s *sandbox) udpEcho(t testing.TB, addr string) bool {
	t.Helper()
	got := false
	err := netns.Do(s.Path, func() error {
		c, err := net.Dial("udp4", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write([]byte("hello"))
		buf := make([]byte, 8)
		n, _ := c.Read(buf)
		got = string(buf[:n]) == "hello"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// lookup asks a DNS question from inside the sandbox, to the world's
// name server (the kernel sends it to the resolver).
func (s *sandbox) lookup(t testing.TB, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c, err := netns.Dialer(s.Path)(context.Background(), "udp4", nettest.DNSAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	resp, _, err := (&dns.Client{Timeout: 3 * time.Second}).ExchangeWithConn(q, &dns.Conn{Conn: c})
	if err != nil {
		t.Fatalf("lookup %s from the sandbox: %v", name, err)
	}
	return resp
}

func (e *env) eventsFor(sandboxID string) []audit.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []audit.Event
	for _, ev := range e.events {
		if ev.SandboxID == sandboxID {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) allEvents() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprintf("%+v", e.events)
}

// hostServer runs an HTTP server in the host namespace on every address.
func hostServer(t testing.TB) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nhost")
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).AddrPort()
}

func itoa(n uint16) string { return fmt.Sprint(n) }

func writeTemp(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// idle waits until the proxy holds no connection (every one it opened was
// released) and fails the test if that does not happen.
func (e *env) idle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.px.mu.Lock()
		n, c := len(e.px.flows), len(e.px.counts)+len(e.px.tenants)+e.px.total
		e.px.mu.Unlock()
		if n == 0 && c == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy still tracks %d connections and %d sandboxes after its clients left", n, c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
