package stack

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/audit"
	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/ports"
	"github.com/sandlot/sandlot/store"
	storeaudit "github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// The tests in this file attack the walls of the daemon's sandbox
// networking as a hostile tenant would, from inside its sandboxes: they
// must learn nothing of the host, keep no connection a stricter policy
// refuses, take nothing of another tenant's share of the daemon (its
// audit trail), and send nothing out past the egress guard.
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

// servedGuard is the egress guard as serve composes it when networks are
// on: the guard knows the values of the tenants' stored secrets.
func servedGuard(t *testing.T, e *env) *guard.Guard {
	t.Helper()
	g, err := guard.New(guard.Config{Known: func(ctx context.Context, tenantID string) ([]string, error) {
		ss, err := e.lookupSecrets(ctx, tenantID, nil)
		vals := make([]string, len(ss))
		for i, s := range ss {
			vals[i] = s.Value
		}
		return vals, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// routeGuard is the ports route's guard as serve wires it (cli's
// portsGuard): the target's tenant and context.
type routeGuard struct {
	g *guard.Guard
	m *contexts.Manager
}

func (p routeGuard) Body(ctx context.Context, t ports.Target) ports.Redactor {
	if p.g.ModeOf(ctx, t.Tenant) == guard.ModeOff {
		return nil
	}
	return p.g.File(p.m.Masked(ctx, t.Context), t.Tenant)
}

func (p routeGuard) Message(ctx context.Context, t ports.Target, binary bool) ports.Redactor {
	return p.g.Message(p.m.Masked(ctx, t.Context), t.Tenant, binary)
}

func (p routeGuard) Text(ctx context.Context, t ports.Target, s string) string {
	return p.g.Text(p.m.Masked(ctx, t.Context), t.Tenant, s)
}

// TestWallStoredSecretEncoded: a sandbox that holds one of its tenant's
// stored secret values writes it out encoded (base64 at two alignments,
// hex, URL and JSON escaping), in a result, in output split across
// writes, in a file read whole, and in one downloaded in 1 MiB chunks
// with the hex form across the chunks' boundary; none of the forms
// leaves. Before, the stored values were masked by a plain replace
// of the raw value in front of the guard, and every encoded form got out.
func TestWallStoredSecretEncoded(t *testing.T) {
	e := newEnv(t, 0)
	value := `vault"Pa55/phrase+` + fmt.Sprintf("%x", time.Now().UnixNano()) // made at test time; no detector knows it
	e.addSecret("t1", "VAULT", "VAULT_TOKEN", []string{"api.example.test"}, value)
	forms := map[string]string{
		"raw":       value,
		"base64":    base64.StdEncoding.EncodeToString([]byte("x" + value)),
		"base64-2":  base64.StdEncoding.EncodeToString([]byte("ab" + value)),
		"hex":       hex.EncodeToString([]byte(value)),
		"url":       url.QueryEscape(value),
		"json":      strings.Trim(string(must(json.Marshal(value))), `"`),
		"base64url": base64.RawURLEncoding.EncodeToString([]byte(value)),
	}
	m := contexts.NewManager(memory.New(), newProvider(t, "crun", e.st), contexts.Config{PoolSize: -1, Networks: e.st, Guard: servedGuard(t, e)})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t1", ConversationID: "c", PathID: "main"}
	code := fmt.Sprintf(`import base64, json, sys, time, urllib.parse
v = %q
print("b64", base64.b64encode(b"x" + v.encode()).decode())
print("url", urllib.parse.quote_plus(v), "json", json.dumps(v)[1:-1], "b64url", base64.urlsafe_b64encode(v.encode()).decode().rstrip("="))
h = v.encode().hex()
sys.stdout.write("split " + h[:9]); sys.stdout.flush(); time.sleep(0.05)
sys.stdout.write(h[9:] + "\n"); sys.stdout.flush()
open("/tmp/small.txt", "w").write("file " + h + " " + base64.b64encode(b"x" + v.encode()).decode() + "\n")
open("/tmp/leak.txt", "w").write(("z" * 99 + "\n") * 10485 + "z" * 50 + " file " + h + " " + base64.b64encode(b"x" + v.encode()).decode() + "\n")
base64.b64encode(b"ab" + v.encode()).decode()
`, value)
	var streamed strings.Builder
	res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: code}, func(ev agent.OutputEvent) {
		streamed.WriteString(ev.Data)
	})
	if err != nil || res.Error != nil {
		t.Fatalf("run: %+v %v", res, err)
	}
	out := map[string]string{"streamed": streamed.String(), "stdout": res.Stdout}
	for _, r := range res.Results {
		out["result"] += r.Text
	}
	err = m.Use(ctx, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		r, err := sb.ReadFile(ctx, agent.ReadParams{Path: "/tmp/small.txt"})
		if err != nil {
			return err
		}
		out["file"] = string(r.Data)
		var dl strings.Builder
		err = contexts.ReadFile(ctx, sb, "/tmp/leak.txt", func(c contexts.FileChunk) error { dl.Write(c.Data); return nil })
		out["download"] = dl.String()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out["stdout"], "split ") || !strings.Contains(out["download"], "file ") || out["result"] == "" {
		t.Fatalf("the program did not run as meant: %q", out)
	}
	for where, s := range out {
		for form, f := range forms {
			if strings.Contains(s, f) {
				t.Errorf("the stored secret left in %s as %s", where, form)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// wsServer is a WebSocket server in python's standard library alone (the
// sandbox has no websocket module): on port it answers one handshake per
// connection, sends msg as one text message and closes.
const wsServer = `import base64, hashlib, socket, sys
port, msg = int(sys.argv[1]), sys.argv[2].encode()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(8)
while True:
    c, _ = s.accept()
    req = b""
    while b"\r\n\r\n" not in req:
        more = c.recv(4096)
        if not more:
            break
        req += more
    if b"\r\n\r\n" not in req:
        c.close()
        continue
    key = [l.split(b":", 1)[1].strip() for l in req.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key:")][0]
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    c.sendall(bytes([0x81, len(msg)]) + msg + bytes([0x88, 2, 3, 0xe8]))
    c.close()
`

// TestWallPortsGuarded: what a sandbox serves on its ports leaves through
// the ports route only past the egress guard, as the same file does
// through the files API: a page holding an address and a stored secret
// (hex), and a WebSocket message holding them. Before, the route relayed
// both as the sandbox wrote them while the files API masked the file.
func TestWallPortsGuarded(t *testing.T) {
	e := newEnv(t, 0)
	value := "vault-Pa55phrase-" + fmt.Sprintf("%x", time.Now().UnixNano())
	e.addSecret("closed", "VAULT", "VAULT_TOKEN", []string{"api.example.test"}, value)
	g := servedGuard(t, e)
	m := contexts.NewManager(memory.New(), newProvider(t, "crun", e.st), contexts.Config{PoolSize: -1, Networks: e.st, Guard: g})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	h, err := e.st.Ports("sandlot.localhost", func(context.Context, string, string, string) error { return nil }, nil, nil, routeGuard{g, m})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	ctx := context.Background()
	id := contexts.Identity{TenantID: "closed", ConversationID: "ports", PathID: "main"}
	rec, err := m.GetOrCreate(ctx, id, contexts.CreateOptions{Network: &policy.Policy{Ingress: policy.Ingress{Public: true}}})
	if err != nil {
		t.Fatal(err)
	}
	email := fmt.Sprintf("walls%d@exemplar.ie", time.Now().UnixNano()%1e6)
	secretHex := hex.EncodeToString([]byte(value))
	page := "contact " + email + " token " + secretHex
	script := fmt.Sprintf(`mkdir -p /tmp/w && printf '%%s\n' %q > /tmp/w/p.txt && cat > /tmp/ws.py <<'PY'
%sPY
(cd /tmp/w && nohup python3 -m http.server 8080 --bind 0.0.0.0 >/dev/null 2>&1 &)
nohup python3 /tmp/ws.py 8081 %q >/dev/null 2>&1 &
for p in 8080 8081; do for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done`, page, wsServer, "ws "+email+" "+secretHex)
	if _, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "bash", Code: script}, nil); err != nil {
		t.Fatal(err)
	}
	leaks := func(where, s string) {
		t.Helper()
		for _, v := range []string{email, secretHex, value} {
			if strings.Contains(s, v) {
				t.Errorf("%s: %q left as the sandbox wrote it: %q", where, v, s)
			}
		}
	}

	// The files API: masked (the wall the route must match).
	err = m.Use(ctx, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		var b strings.Builder
		err := contexts.ReadFile(ctx, sb, "/tmp/w/p.txt", func(c contexts.FileChunk) error { b.Write(c.Data); return nil })
		leaks("the files API", b.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get(srv.URL + "/v1/contexts/" + rec.ID + "/ports/8080/p.txt")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "contact ") {
		t.Fatalf("the page through the route: %d %q", resp.StatusCode, body)
	}
	leaks("the ports route (HTTP)", string(body))

	status, msgs := wsMessages(t, strings.TrimPrefix(srv.URL, "http://"), "/v1/contexts/"+rec.ID+"/ports/8081/")
	if !strings.Contains(status, " 101 ") || len(msgs) == 0 || !strings.HasPrefix(msgs[0], "ws ") {
		t.Fatalf("the WebSocket through the route: %q %q", status, msgs)
	}
	leaks("the ports route (WebSocket)", msgs[0])
}

// wsMessages opens a WebSocket to path at addr with a bounded raw client
// and returns the status line and the payloads of the frames that came
// until the connection closed (a server's frames are unmasked).
func wsMessages(t *testing.T, addr, path string) (string, []string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, addr)
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		if l == "\r\n" {
			break
		}
	}
	var msgs []string
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return status, msgs
		}
		n := int(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			io.ReadFull(br, b[:])
			n = int(b[0])<<8 | int(b[1])
		case 127:
			t.Fatal("a frame over 64 KiB")
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			return status, msgs
		}
		msgs = append(msgs, string(p))
	}
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
