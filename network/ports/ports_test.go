package ports

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network"
	"github.com/sandlot/sandlot/network/netns"
	"github.com/sandlot/sandlot/network/nettest"
	"github.com/sandlot/sandlot/network/policy"
)

func TestMain(m *testing.M) { nettest.Main(m) }

const token = "traffic-token-1"

type seen struct {
	Host, Path, Query, Token, ForwardedHost, Prefix string
	// Headers the sandbox got that a client could have forged.
	ForwardedFor, Forwarded, RealIP string
}

// sandboxServer serves, inside the sandbox's namespace on every address,
// an HTTP echo of what it received and a websocket echo at /ws.
func sandboxServer(t *testing.T, n *network.Net, port int) {
	t.Helper()
	l, err := netns.Listen(context.Background(), n.Path, "tcp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", websocket.Handler(func(c *websocket.Conn) {
		for {
			var msg string
			if err := websocket.Message.Receive(c, &msg); err != nil {
				return
			}
			websocket.Message.Send(c, msg)
		}
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(seen{Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Token: r.Header.Get(e2bwire.HeaderTrafficToken),
			ForwardedHost: r.Header.Get("X-Forwarded-Host"), Prefix: r.Header.Get("X-Forwarded-Prefix"),
			ForwardedFor: strings.Join(r.Header.Values("X-Forwarded-For"), ","), Forwarded: r.Header.Get("Forwarded"), RealIP: r.Header.Get("X-Real-Ip")})
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

type fixture struct {
	srv  *httptest.Server
	nets map[string]*network.Net
	ing  map[string]policy.Ingress
}

func newFixture(t *testing.T, mut ...func(*Config)) *fixture {
	t.Helper()
	nettest.Require(t)
	ctx := context.Background()
	m, err := network.New(network.Config{StateDir: t.TempDir(), NetnsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Purge(ctx) })
	f := &fixture{nets: map[string]*network.Net{}, ing: map[string]policy.Ingress{
		"private": {},
		"public":  {Public: true},
		"masked":  {MaskRequestHost: "localhost:${PORT}"},
	}}
	for id := range f.ing {
		// Mode none: ports are served whatever the egress.
		n, err := m.Setup(ctx, id, &policy.Effective{})
		if err != nil {
			t.Fatal(err)
		}
		f.nets[id] = n
		sandboxServer(t, n, 8080)
	}
	cfg := Config{
		Lookup: func(ctx context.Context, id string) (Target, error) {
			n, ok := m.Get(id)
			if !ok {
				return Target{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
			}
			return Target{Addr: n.Addr, Ingress: f.ing[id]}, nil
		},
		Authorize: func(ctx context.Context, id, tok string) error {
			if subtle.ConstantTimeCompare([]byte(tok), []byte(token)) != 1 {
				return errdefs.ErrPermissionDenied
			}
			return nil
		},
		Dial: m.DialSandbox,
	}
	for _, mu := range mut {
		mu(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) get(t *testing.T, host, path, tok string) (int, seen, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	if host != "" {
		req.Host = host
	}
	if tok != "" {
		req.Header.Set(e2bwire.HeaderTrafficToken, tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var s seen
	json.Unmarshal(b, &s)
	return resp.StatusCode, s, string(b)
}

func TestHostAndPathRoutes(t *testing.T) {
	f := newFixture(t)
	host := Host(DefaultDomain, "private", 8080)
	tests := []struct {
		name, host, path, token string
		status                  int
		want                    seen
		body                    string
	}{
		{name: "host form", host: host, path: "/a/b?x=1", token: token, status: 200,
			want: seen{Host: host, Path: "/a/b", Query: "x=1", ForwardedHost: host}},
		{name: "host form with the listener's port", host: host + ":8443", path: "/", token: token, status: 200,
			want: seen{Host: host + ":8443", Path: "/", ForwardedHost: host + ":8443"}},
		{name: "no token", host: host, path: "/", status: 403, body: "missing traffic access token"},
		{name: "wrong token", host: host, path: "/", token: "nope", status: 403, body: "invalid traffic access token"},
		{name: "public", host: Host(DefaultDomain, "public", 8080), path: "/p", status: 200,
			want: seen{Host: Host(DefaultDomain, "public", 8080), Path: "/p", ForwardedHost: Host(DefaultDomain, "public", 8080)}},
		{name: "masked host", host: Host(DefaultDomain, "masked", 8080), path: "/m", token: token, status: 200,
			want: seen{Host: "localhost:8080", Path: "/m", ForwardedHost: Host(DefaultDomain, "masked", 8080)}},
		{name: "path form", path: "/v1/contexts/private/ports/8080/a/b?x=1", token: token, status: 200,
			want: seen{Host: strings.TrimPrefix(f.srv.URL, "http://"), Path: "/a/b", Query: "x=1", ForwardedHost: strings.TrimPrefix(f.srv.URL, "http://"), Prefix: "/v1/contexts/private/ports/8080/"}},
		{name: "path form root", path: "/v1/contexts/private/ports/8080", token: token, status: 200,
			want: seen{Host: strings.TrimPrefix(f.srv.URL, "http://"), Path: "/", ForwardedHost: strings.TrimPrefix(f.srv.URL, "http://"), Prefix: "/v1/contexts/private/ports/8080"}},
		{name: "unknown sandbox", host: Host(DefaultDomain, "ghost", 8080), path: "/", token: token, status: 502, body: `{"sandboxId":"ghost","message":"The sandbox was not found","code":502}`},
		{name: "unknown sandbox, path form", path: "/v1/contexts/ghost/ports/8080/", token: token, status: 404, body: "not found"},
		{name: "closed port", host: Host(DefaultDomain, "private", 8081), path: "/", token: token, status: 502, body: "port 8081 is not open"},
		{name: "port zero", host: Host(DefaultDomain, "private", 0), path: "/", token: token, status: 400},
		{name: "port too big", host: "70000-private." + DefaultDomain, path: "/", token: token, status: 400},
		{name: "port with a zero", host: "08080-private." + DefaultDomain, path: "/", token: token, status: 400},
		{name: "bad id", path: "/v1/contexts/a.b/ports/8080/", token: token, status: 400},
		{name: "not an id", path: "/v1/contexts/a%2Fb/ports/8080/", token: token, status: 404},
		{name: "other domain", host: "8080-private.evil.test", path: "/", token: token, status: 404},
		{name: "deeper name", host: "x.8080-private." + DefaultDomain, path: "/", token: token, status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, s, body := f.get(t, tt.host, tt.path, tt.token)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			s.ForwardedFor, s.Forwarded, s.RealIP = "", "", "" // TestWallForwardedHeaders
			if tt.status == 200 && s != tt.want {
				t.Errorf("the sandbox saw %+v, want %+v", s, tt.want)
			}
			if !strings.Contains(body, tt.body) {
				t.Errorf("body %q, want %q in it", body, tt.body)
			}
			if s.Token != "" {
				t.Errorf("the traffic token reached the sandbox")
			}
		})
	}
}

func TestWebSocket(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, host, path string
		token            string
		ok               bool
	}{
		{"host form", Host(DefaultDomain, "private", 8080), "/ws", token, true},
		{"path form", "", "/v1/contexts/private/ports/8080/ws", token, true},
		{"no token", Host(DefaultDomain, "private", 8080), "/ws", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse(f.srv.URL)
			host := tc.host
			if host == "" {
				host = u.Host
			}
			cfg, err := websocket.NewConfig("ws://"+host+tc.path, "http://"+host)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				cfg.Header.Set(e2bwire.HeaderTrafficToken, tc.token)
			}
			raw, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			raw.SetDeadline(time.Now().Add(5 * time.Second))
			ws, err := websocket.NewClient(cfg, raw)
			if !tc.ok {
				if err == nil {
					t.Error("the upgrade succeeded without a token")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, msg := range []string{"hello", strings.Repeat("x", 100000)} {
				if err := websocket.Message.Send(ws, msg); err != nil {
					t.Fatal(err)
				}
				var got string
				if err := websocket.Message.Receive(ws, &got); err != nil || got != msg {
					t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(got), err)
				}
			}
		})
	}
}

// TestRealServerInTheSandbox reaches a program the sandbox runs
// (python3 -m http.server) with a plain HTTP client.
func TestRealServerInTheSandbox(t *testing.T) {
	f := newFixture(t)
	py := testenv.RequireBinary(t, "/usr/bin/python3")
	n := f.nets["public"]
	dir := t.TempDir()
	cmd := exec.Command("nsenter", "--net="+n.Path, "--", py, "-m", "http.server", "8000", "--bind", "0.0.0.0", "--directory", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	host := Host(DefaultDomain, "public", 8000)
	var status int
	var body string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if status, _, body = f.get(t, host, "/", ""); status == 200 {
			break
		}
	}
	if status != 200 || !strings.Contains(body, "Directory listing") {
		t.Errorf("python's server through the port route: %d %q", status, body)
	}
}

func TestParse(t *testing.T) {
	h, err := New(Config{Domain: "Sandbox.Example.", Lookup: func(context.Context, string) (Target, error) { return Target{}, nil },
		Authorize: func(context.Context, string, string) error { return errors.New("no") }})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"3000-abc.sandbox.example":      true,
		"3000-abc.SANDBOX.example.:443": true,
		"3000-abc.example":              false,
		"abc.sandbox.example":           false,
		"a.3000-abc.sandbox.example":    false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		if got := h.Match(r); got != want {
			t.Errorf("Match(%q) = %v, want %v", host, got, want)
		}
	}
	if _, err := New(Config{PathPrefix: "v1", Lookup: func(context.Context, string) (Target, error) { return Target{}, nil },
		Authorize: func(context.Context, string, string) error { return nil }}); err == nil {
		t.Error("a path prefix without slashes was accepted")
	}
}
