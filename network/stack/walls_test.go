package stack

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store"
	storeaudit "github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// The tests in this file attack the walls of the daemon's sandbox
// networking as a hostile tenant would, from inside its sandboxes: they
// must learn nothing of the host, keep no connection a stricter policy
// refuses, take nothing of another tenant's share of the daemon (its
// audit trail); walls_egress_test.go attacks the egress guard's wall.
// docs/security-walls-daemon.md says what each wall is meant to stop.

// auditPath is the daemon's path from the stack's events to the store's
// audit trail, as serve wires it (StoreEvent into the store's
// audit.Writer), on a real Postgres store.
func auditPath(t *testing.T) (AuditFunc, store.Backend) {
	t.Helper()
	t.Setenv("SANDLOT_TEST_POSTGRES", nettest.PostgresURL(t)) // the machine's server, from this namespace
	st, err := postgres.Open(context.Background(), pgtest.SchemaURL(t), postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := storeaudit.NewWriter(st, storeaudit.WriterConfig{})
	t.Cleanup(func() {
		w.Close(context.Background())
		st.Close()
	})
	return func(ev audit.Event, contextID string) { w.Add(StoreEvent(ev, contextID)) }, st
}

// TestWallDNSFlood: one tenant's sandbox floods the resolver with
// questions while another tenant's sandbox makes 20 lookups; every one
// of the other tenant's lookups is in the audit trail. On the code with
// one queue for all tenants and one INSERT per event, the flood filled
// the queue and the other tenant's events were dropped.
func TestWallDNSFlood(t *testing.T) {
	path, st := auditPath(t)
	var seenA atomic.Int64
	e := newEnvWith(t, 0, func(cfg *Config) {
		cfg.Audit = func(ev audit.Event, contextID string) {
			if ev.Tenant == "tenant-a" {
				seenA.Add(1)
			}
			path(ev, contextID)
		}
	})
	ctx := context.Background()
	pol := policy.Policy{Mode: policy.Allowlist, Allow: rules("example.org")}
	na, _, err := e.st.Setup(ctx, "sb-flood", "tenant-a", "ctx-a", pol)
	if err != nil {
		t.Fatal(err)
	}
	nb, _, err := e.st.Setup(ctx, "sb-quiet", "tenant-b", "ctx-b", pol)
	if err != nil {
		t.Fatal(err)
	}

	// Tenant A: fire-and-forget questions from 8 sockets, as fast as the
	// sandbox can send them, until B is done.
	stop := make(chan struct{})
	var sent, answered atomic.Int64
	var flood sync.WaitGroup
	for w := range 8 {
		c, err := netns.Dialer(na.Path)(ctx, "udp4", nettest.DNSAddr.String())
		if err != nil {
			t.Fatal(err)
		}
		flood.Add(2)
		go func() { // drain the answers, so the sandbox's socket never fills
			defer flood.Done()
			buf := make([]byte, 1500)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
				answered.Add(1)
			}
		}()
		go func() {
			defer flood.Done()
			defer c.Close()
			q := new(dns.Msg)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				q.SetQuestion(fmt.Sprintf("f%d-%d.flood.test.", w, i), dns.TypeA)
				b, _ := q.Pack()
				if _, err := c.Write(b); err == nil {
					sent.Add(1)
				}
			}
		}()
	}
	stopFlood := sync.OnceFunc(func() { close(stop); flood.Wait() })
	defer stopFlood()
	// Under way: the resolver has answered (and so reported) 20000 of
	// them, five times what the daemon's audit queue held.
	waitUntil(t, "the flood to be under way", 120*time.Second, func() bool { return answered.Load() >= 20000 })

	// Tenant B: 20 lookups over TCP (the flood fills the resolver's UDP
	// socket, where the kernel drops datagrams of every sender alike),
	// each asked again until answered.
	underWay := time.Now()
	for i := range 20 {
		name := fmt.Sprintf("b%d.quiet.test", i)
		waitUntil(t, "an answer to "+name, 60*time.Second, func() bool { return lookupFrom(nb.Path, name) })
	}
	t.Logf("tenant B's lookups took %s; tenant A sent %d questions, %d were answered, %d events reached the audit path",
		time.Since(underWay).Round(time.Millisecond), sent.Load(), answered.Load(), seenA.Load())
	stopFlood()

	want := map[string]bool{}
	for i := range 20 {
		want[fmt.Sprintf("b%d.quiet.test", i)] = true
	}
	missing := func() []string {
		evs, err := st.ListAudit(ctx, "tenant-b", 1000)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, ev := range evs {
			seen[ev.Detail["host"]] = true
		}
		var out []string
		for h := range want {
			if !seen[h] {
				out = append(out, h)
			}
		}
		return out
	}
	// The trail is written behind the connections: wait for it to drain.
	var m []string
	deadline := time.Now().Add(60 * time.Second)
	for m = missing(); len(m) > 0 && time.Now().Before(deadline); m = missing() {
		time.Sleep(100 * time.Millisecond)
	}
	if len(m) > 0 {
		t.Fatalf("tenant B's lookups missing from the audit trail after tenant A's flood: %d of 20 (%s)", len(m), strings.Join(m, ", "))
	}
}

// lookupFrom asks name once over TCP from inside the namespace at path
// and reports whether an answer came.
func lookupFrom(path, name string) bool {
	c, err := netns.Dialer(path)(context.Background(), "tcp4", nettest.DNSAddr.String())
	if err != nil {
		return false
	}
	defer c.Close()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	_, _, err = (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).ExchangeWithConn(q, &dns.Conn{Conn: c})
	return err == nil
}

// waitUntil polls cond until it holds, failing t after bound.
func waitUntil(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, bound, cond)
}

// hostNetDirs are where this host's sysfs keeps its network interfaces
// (name, MAC address, counters): /sys/class/net's entries resolved into
// /sys/devices, the hardware ones included.
func hostNetDirs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		p, err := filepath.EvalSymlinks(filepath.Join("/sys/class/net", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatal("this host's /sys/class/net is empty: nothing to attack")
	}
	return out
}

// TestWallSysNet attacks what a network sandbox learns of the host from
// the host's /sys, which crun and runc sandboxes with a network get
// (read-only, docs/network.md "The runtime"): the host's network cards
// (name, MAC address, traffic counters) under /sys/devices, the hardware
// ones included, and under /sys/class/net. gVisor's /sys is its own.
func TestWallSysNet(t *testing.T) {
	e := newEnv(t, 0)
	dirs := hostNetDirs(t)
	var cmd strings.Builder
	for _, d := range dirs {
		cmd.WriteString("ls " + d + " 2>/dev/null; ls " + filepath.Dir(d) + " 2>/dev/null; cat " + d + "/address 2>/dev/null; ")
	}
	cmd.WriteString("ls /sys/class/net 2>/dev/null; find /sys/devices -maxdepth 7 -path '*/net/*' -name address 2>/dev/null; echo end")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			p := newProvider(t, kind, e.st)
			sb := create(t, p, "t1", &policy.Policy{})
			out, code := sh(t, sb, cmd.String())
			if code != 0 || strings.TrimSpace(out) != "end" {
				t.Errorf("the sandbox saw the host's network interfaces (%v):\n%s", dirs, out)
			}
		})
	}
}

// TestWallStricterUpdate attacks a policy update: a sandbox opens
// connections while its policy allows them, then its tenant (or the
// operator) takes that permission away. Connections the new policy
// forbids must be cut, not only refused next time; those it still allows
// keep going.
func TestWallStricterUpdate(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	rules := func(ss ...string) []policy.Rule {
		var out []policy.Rule
		for _, s := range ss {
			out = append(out, policy.MustRule(s))
		}
		return out
	}
	tests := []struct {
		name          string
		before, after policy.Policy
		cut, kept     string // the request lines of a kept-alive HTTP connection each
	}{
		{"allowlist loses a name",
			policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test", "api.test")},
			policy.Policy{Mode: policy.Allowlist, Allow: rules("api.test")},
			"www.example.test", "api.test"},
		{"open becomes an allowlist",
			policy.Policy{Mode: policy.Open},
			policy.Policy{Mode: policy.Allowlist, Allow: rules("api.test")},
			"www.example.test", "api.test"},
		{"allowlist becomes none",
			policy.Policy{Mode: policy.Allowlist, Allow: rules("*.example.test")},
			policy.Policy{},
			"www.example.test", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("upd-%d", i)
			rn, _, err := e.st.Setup(ctx, id, "t1", "", tt.before)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.st.Teardown(ctx, id) })
			open := func(host string) *keptAlive {
				t.Helper()
				c, err := netns.Dialer(rn.Path)(ctx, "tcp4", "203.0.113.10:80")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				k := &keptAlive{c: c, r: bufio.NewReader(c), host: host}
				if err := k.get(); err != nil {
					t.Fatalf("%s before the update: %v", host, err)
				}
				return k
			}
			cut := open(tt.cut)
			var kept *keptAlive
			if tt.kept != "" {
				kept = open(tt.kept)
			}
			if _, err := e.st.Update(ctx, id, "t1", tt.after); err != nil {
				t.Fatal(err)
			}
			if err := cut.get(); err == nil {
				t.Errorf("%s: a connection the new policy forbids still works", tt.cut)
			}
			if kept != nil {
				if err := kept.get(); err != nil {
					t.Errorf("%s: a connection the new policy allows was cut: %v", tt.kept, err)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for !cutAudited(e, id) {
				if time.Now().After(deadline) {
					t.Fatalf("the audit trail does not say the connection was closed by the update: %+v", e.auditEvents())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// keptAlive is a kept-alive HTTP connection from inside a sandbox.
type keptAlive struct {
	c    net.Conn
	r    *bufio.Reader
	host string
}

// get sends one request on the connection and reads its answer's status
// line and headers (the world's servers answer small bodies).
func (k *keptAlive) get() error {
	k.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(k.c, "GET /kept HTTP/1.1\r\nHost: %s\r\n\r\n", k.host); err != nil {
		return err
	}
	resp, err := readResponse(k.r)
	if err != nil {
		return err
	}
	if resp != 200 {
		return fmt.Errorf("status %d", resp)
	}
	return nil
}

func readResponse(r *bufio.Reader) (int, error) {
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func cutAudited(e *env, sandboxID string) bool {
	for _, ev := range e.auditEvents() {
		if ev.SandboxID == sandboxID && strings.HasSuffix(ev.Reason, "; closed by a policy update") {
			return true
		}
	}
	return false
}
