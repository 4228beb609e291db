package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/tenant"
)

// env is a front door over the /v1 server of servertest's fakes, with two
// tenants, "tenant-a" (KeyA) and "tenant-b" (KeyB).
type env struct {
	*servertest.Env // the fakes; its own Server is not the one served
	front           *frontDoor
}

// newEnv builds an env; mod (may be nil) adjusts the front door's
// configuration first, V1 included.
func newEnv(t *testing.T, mod func(*frontConfig)) *env {
	t.Helper()
	se := servertest.NewEnv(func(c *server.Config) { c.MaxBodyBytes, c.MaxUploadBytes = 256<<10, 3<<20 })
	fc := frontConfig{V1: se.Config}
	if mod != nil {
		mod(&fc)
	}
	return &env{Env: se, front: newFrontDoor(fc)}
}

type req struct {
	method, path, key string
	body              any // string, []byte or a value to encode
	header            map[string]string
}

func (e *env) do(t *testing.T, r req) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	if r.key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.key)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.front.ServeHTTP(w, hr)
	return w
}

// matcher is a surface of a handler and its match.
type matcher struct {
	http.Handler
	match func(*http.Request) bool
}

func (m matcher) Match(r *http.Request) bool { return m.match(r) }

func TestRequestID(t *testing.T) {
	e := newEnv(t, nil)
	w := e.do(t, req{method: "GET", path: "/healthz", header: map[string]string{"X-Request-Id": "abc-123"}})
	if w.Header().Get("X-Request-Id") != "abc-123" {
		t.Fatal(w.Header())
	}
	w = e.do(t, req{method: "GET", path: "/v1//contexts"})
	if w.Code/100 != 3 || w.Header().Get("Location") != "/v1/contexts" { // the mux's redirect to the clean path
		t.Fatalf("unclean path: %d %v", w.Code, w.Header())
	}
	w = e.do(t, req{method: "GET", path: "/healthz", header: map[string]string{"X-Request-Id": "bad id\x01"}})
	if got := w.Header().Get("X-Request-Id"); len(got) != 36 {
		t.Fatalf("%q", got)
	}
}

func TestE2BMatcherFirst(t *testing.T) {
	e := newEnv(t, func(c *frontConfig) {
		c.E2B = matcher{http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }),
			func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/sandboxes") }}
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id, _ := tenant.From(r.Context()); id == nil {
				t.Error("MCP without tenant")
			}
			w.WriteHeader(298)
		})
	})
	if w := e.do(t, req{method: "POST", path: "/sandboxes"}); w.Code != 299 {
		t.Fatalf("e2b: %d", w.Code)
	}
	if w := e.do(t, req{method: "POST", path: "/mcp"}); w.Code != 401 {
		t.Fatalf("mcp without key: %d", w.Code)
	}
	if w := e.do(t, req{method: "POST", path: "/mcp", key: e.KeyA}); w.Code != 298 {
		t.Fatalf("mcp: %d", w.Code)
	}
}

// TestGracefulShutdown: a request in flight when Serve's context ends
// completes; the listener stops accepting; /readyz says so meanwhile.
func TestGracefulShutdown(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, func(c *frontConfig) { c.ShutdownTimeout = 5 * time.Second })
	var once sync.Once
	e.Tools.Hook = func() {
		once.Do(func() { close(started) })
		<-release
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.front.serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	respc := make(chan *http.Response, 1)
	go func() {
		hr, _ := http.NewRequest("POST", url+"/v1/tools/run_code", strings.NewReader(`{"args":{"language":"python","code":"x"}}`))
		hr.Header.Set("X-API-KEY", e.KeyA)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Error(err)
		}
		respc <- resp
	}()
	<-started
	cancel()
	// Draining: /readyz tells the load balancer, while the request runs.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w := e.do(t, req{method: "GET", path: "/readyz"})
		if w.Code == http.StatusServiceUnavailable && strings.Contains(w.Body.String(), "shutting down") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz while draining: %d %s", w.Code, w.Body)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("still accepting after shutdown began")
	}
	close(release)
	resp := <-respc
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("in-flight request: %+v", resp)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestMCPCompressedBody: MCP decodes no Content-Encoding either: a
// compressed body is refused with 415 before the key check, as on /v1,
// and never reaches the handler.
func TestMCPCompressedBody(t *testing.T) {
	e := newEnv(t, func(c *frontConfig) {
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("a compressed body reached MCP") })
	})
	for _, key := range []string{"", "key"} {
		if key != "" {
			key = e.KeyA
		}
		w := e.do(t, req{method: "POST", path: "/mcp", key: key, body: "\x1f\x8b\x08\x00",
			header: map[string]string{"Content-Encoding": "gzip", "Content-Type": "application/json"}})
		if w.Code != http.StatusUnsupportedMediaType {
			t.Fatalf("key %q: status %d %s, want 415", key, w.Code, w.Body)
		}
	}
}

// TestMetricsMethod: /metrics answers GET (and HEAD) only; another method
// gets /v1's 405 with Allow, as when /metrics was one of /v1's routes.
func TestMetricsMethod(t *testing.T) {
	e := newEnv(t, func(c *frontConfig) {
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "m 1\n") })
		c.MetricsToken = "tok"
	})
	w := e.do(t, req{method: "POST", path: "/metrics", header: map[string]string{"Authorization": "Bearer tok"}})
	var body api.Error
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" ||
		json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Code != "invalid_argument" {
		t.Fatalf("POST /metrics: %d Allow=%q %s", w.Code, w.Header().Get("Allow"), w.Body)
	}
	if w := e.do(t, req{method: "GET", path: "/metrics", header: map[string]string{"Authorization": "Bearer tok"}}); w.Code != 200 {
		t.Fatalf("GET /metrics: %d", w.Code)
	}
}

// TestAccessLog: one line per request names its route, status and the
// authenticated tenant (on /v1 and MCP alike), and a panic in a handler is
// a logged 500 in /v1's error shape, not a dropped connection.
func TestAccessLog(t *testing.T) {
	var logs testenv.Buffer
	e := newEnv(t, func(c *frontConfig) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	})
	if w := e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyA, header: map[string]string{"X-Request-Id": "rid-1"}}); w.Code != 200 {
		t.Fatalf("GET /v1/contexts: %d", w.Code)
	}
	w := e.do(t, req{method: "POST", path: "/mcp", key: e.KeyB, header: map[string]string{"X-Request-Id": "rid-2"}})
	if w.Code != 500 || decodeCode(t, w) != "internal" {
		t.Fatalf("panicking MCP: %d %s", w.Code, w.Body)
	}
	e.do(t, req{method: "GET", path: "/v1/nothing", header: map[string]string{"X-Request-Id": "rid-3"}})
	want := map[string]struct {
		route  string
		status int
		tenant string
	}{
		"rid-1": {"GET /v1/contexts", 200, "tenant-a"},
		"rid-2": {"/mcp", 500, "tenant-b"},
		"rid-3": {"none", 404, ""},
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Msg       string `json:"msg"`
			RequestID string `json:"request_id"`
			Route     string `json:"route"`
			Status    int    `json:"status"`
			Tenant    string `json:"tenant_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Msg != "request" {
			continue
		}
		w, ok := want[l.RequestID]
		if !ok {
			t.Errorf("log line of an unknown request: %s", line)
			continue
		}
		seen++
		if l.Route != w.route || l.Status != w.status || l.Tenant != w.tenant {
			t.Errorf("%s logged route %q status %d tenant %q, want %q %d %q", l.RequestID, l.Route, l.Status, l.Tenant, w.route, w.status, w.tenant)
		}
	}
	if seen != len(want) {
		t.Errorf("%d access-log lines for %d requests:\n%s", seen, len(want), logs.String())
	}
}

func decodeCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	return string(e.Code)
}
