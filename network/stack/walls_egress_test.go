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
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/ports"
	"github.com/sandlot/sandlot/store/memory"
)

// The tests in this file attack the egress guard's wall around the
// daemon's sandbox networking: what a sandbox writes out, serves on its
// ports or reads from its tenant's stored secrets leaves only past the
// guard (walls_test.go holds the network's other walls).

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
