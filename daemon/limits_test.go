package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/tools"
)

// blockingTools holds every call until release is closed and counts the
// calls that entered.
type blockingTools struct {
	entered atomic.Int64
	in      chan struct{} // one value per entered call
	release chan struct{}
}

func newBlockingTools() *blockingTools {
	return &blockingTools{in: make(chan struct{}, 100), release: make(chan struct{})}
}

func (b *blockingTools) Call(ctx context.Context, c tools.Call, out contexts.OutputFunc) (any, error) {
	b.entered.Add(1)
	b.in <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return map[string]any{"ok": true}, nil
}

func (b *blockingTools) ExportFor(string, string) (any, error) { return []any{}, nil }

// serve runs the front door on a real listener and returns its URL.
func serve(t *testing.T, e *env) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.front.serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String()
}

func post(url, key string) (*http.Response, error) {
	req, _ := http.NewRequest("POST", url+"/v1/tools/run_code", strings.NewReader(`{"args":{"code":"1"}}`))
	req.Header.Set("Authorization", "Bearer "+key)
	return http.DefaultClient.Do(req)
}

// A tenant with MaxInFlightPerTenant requests in flight gets 429 with
// Retry-After for the next one; another tenant is not affected. Then the
// global limit refuses everyone except the health probes. Before, every
// request was admitted.
func TestInFlightLimits(t *testing.T) {
	tools := newBlockingTools()
	e := newEnv(t, func(c *frontConfig) {
		c.V1.Tools = tools
		c.Admission = newAdmission(3, 2)
	})
	url := serve(t, e)
	var wg sync.WaitGroup
	defer func() { close(tools.release); wg.Wait() }()
	hold := func(key string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := post(url, key); err == nil {
				resp.Body.Close()
			}
		}()
		<-tools.in
	}
	// refused sends one more request and wants it refused before it
	// reaches a tool.
	refused := func(name, key string) {
		t.Helper()
		got := make(chan *http.Response, 1)
		go func() {
			resp, err := post(url, key)
			if err != nil {
				t.Error(err)
				resp = nil
			}
			got <- resp
		}()
		select {
		case <-tools.in:
			t.Fatalf("%s: admitted past the limit (%d calls in flight)", name, tools.entered.Load())
		case resp := <-got:
			if resp == nil {
				t.FailNow()
			}
			defer resp.Body.Close()
			var body api.Error
			json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || body.Code != "resource_exhausted" {
				t.Fatalf("%s: %d Retry-After=%q %+v, want 429 with Retry-After", name, resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
		}
	}
	hold(e.KeyA)
	hold(e.KeyA)
	refused("tenant A's third request", e.KeyA)
	hold(e.KeyB) // B has its own limit; 3 in flight now: the global limit
	refused("tenant B past the global limit", e.KeyB)
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			t.Fatalf("%s refused under load", p)
		}
	}
}

// A body that trickles in (slowloris) ends with 408 once BodyReadTimeout
// passes, long before the client would finish; before, the server waited
// for it forever (only headers had a deadline).
func TestSlowBody(t *testing.T) {
	e := newEnv(t, func(c *frontConfig) {
		c.BodyReadTimeout = 500 * time.Millisecond
		c.MinBodyRate = 1 << 20
	})
	url := serve(t, e)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/tools/run_code HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", e.KeyA)
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- nil
			return
		}
		io.Copy(io.Discard, resp.Body)
		answered <- resp
	}()
	const trickle = 400 // bytes, one every 50 ms: 20 s
	for i := 0; i < trickle; i++ {
		select {
		case resp := <-answered:
			if resp == nil {
				t.Logf("the server closed the connection after %d trickled bytes", i)
				return
			}
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("status %d, want 408", resp.StatusCode)
			}
			t.Logf("408 after %d trickled bytes", i)
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := conn.Write([]byte(" ")); err != nil {
			t.Logf("the server closed the connection after %d trickled bytes", i)
			return
		}
	}
	t.Fatalf("the server still waits for a body trickled for %d bytes", trickle)
}

// /metrics names tenants (quota gauges): it needs the metrics token.
// Before, it answered anyone.
func TestMetricsToken(t *testing.T) {
	e := newEnv(t, func(c *frontConfig) {
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `sandlot_quota_usage{tenant="t-1"} 0.5`+"\n")
		})
		c.MetricsToken = "s3cret-metrics-token"
	})
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"anonymous", nil, 401},
		{"wrong token", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"tenant key", map[string]string{"Authorization": "Bearer " + e.KeyA}, 401},
		{"metrics token", map[string]string{"Authorization": "Bearer s3cret-metrics-token"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.do(t, req{method: "GET", path: "/metrics", header: tc.hdr})
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d", w.Code, tc.want)
			}
			if tc.want != 200 && strings.Contains(w.Body.String(), "t-1") {
				t.Fatalf("tenant id leaked: %s", w.Body)
			}
		})
	}
}

// slowTools streams n output events, one every gap, then answers.
type slowTools struct {
	n   int
	gap time.Duration
}

func (s slowTools) Call(ctx context.Context, c tools.Call, out contexts.OutputFunc) (any, error) {
	for i := 0; i < s.n; i++ {
		select {
		case <-time.After(s.gap):
		case <-ctx.Done(): // the server gave up on the request
			return nil, ctx.Err()
		}
		if out != nil {
			out(agent.OutputEvent{Stream: agent.Stdout, Data: fmt.Sprintf("tick %d\n", i)})
		}
	}
	return map[string]any{"ok": true}, nil
}

func (slowTools) ExportFor(string, string) (any, error) { return []any{}, nil }

// The body deadline ends with the body: a streamed answer that outlasts
// BodyReadTimeout many times over still arrives whole.
func TestBodyDeadlineSparesStreams(t *testing.T) {
	e := newEnv(t, func(c *frontConfig) {
		c.V1.Tools = slowTools{n: 10, gap: 150 * time.Millisecond}
		c.BodyReadTimeout = 100 * time.Millisecond
	})
	url := serve(t, e)
	req, _ := http.NewRequest("POST", url+"/v1/tools/run_code", strings.NewReader(`{"args":{"code":"1"}}`))
	req.Header.Set("Authorization", "Bearer "+e.KeyA)
	req.Header.Set("Accept", api.ContentTypeNDJSON)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), "tick 9") {
		t.Fatalf("status %d, %v, body %s", resp.StatusCode, err, b)
	}
}
