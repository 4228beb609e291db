package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
)

// TestShellWebSocket: a page's shell is a WebSocket whose key rides in a
// subprotocol (a page cannot set a header there): the session answers
// with the shell's output, and the answer names the shell's subprotocol
// only, never echoing the key.
func TestShellWebSocket(t *testing.T) {
	e := newEnv(t, nil)
	ts := httptest.NewServer(e.Handler)
	defer ts.Close()
	ws := "ws" + strings.TrimPrefix(ts.URL, "http") + "/v1/conversations/c1/paths/main/shell?cols=100&rows=30"
	cfg, err := websocket.NewConfig(ws, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Protocol = []string{api.ShellProtocol, api.ShellKeyProtocolPrefix + e.KeyA}
	conn, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.Config().Protocol; len(got) != 1 || got[0] != api.ShellProtocol {
		t.Fatalf("subprotocol answered: %q", got)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	sc := bufio.NewScanner(conn)
	var out []string
	for sc.Scan() {
		var o api.ShellOutput
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		out = append(out, o.Type+":"+o.Data)
		if o.Type == api.ShellExit {
			break
		}
	}
	if len(out) == 0 || !strings.Contains(strings.Join(out, ""), "/bin/bash -l") {
		t.Fatalf("shell output: %q", out)
	}
}

// TestShellWebSocketWalls attacks the browser shell's doors: a WebSocket
// from another origin is refused even with a good key, so is one with no
// key or a wrong one, and the key's subprotocol authenticates nothing
// but a WebSocket upgrade.
func TestShellWebSocketWalls(t *testing.T) {
	e := newEnv(t, nil)
	ts := httptest.NewServer(e.Handler)
	defer ts.Close()
	path := "/v1/conversations/c1/paths/main/shell"
	for _, tc := range []struct {
		name, origin string
		protocols    []string
		want         int
	}{
		{"other origin", "https://evil.example", []string{api.ShellProtocol, api.ShellKeyProtocolPrefix + e.KeyA}, 403},
		{"no key", ts.URL, []string{api.ShellProtocol}, 401},
		{"wrong key", ts.URL, []string{api.ShellProtocol, api.ShellKeyProtocolPrefix + "e2b_" + strings.Repeat("0", 40)}, 401},
		{"no shell protocol", ts.URL, []string{api.ShellKeyProtocolPrefix + e.KeyA}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", ts.URL+path, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			req.Header.Set("Sec-WebSocket-Protocol", strings.Join(tc.protocols, ", "))
			req.Header.Set("Origin", tc.origin)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.want)
			}
		})
	}
	t.Run("another tenant's context by id", func(t *testing.T) {
		e.runCode(t, e.KeyA, "conv-a", "main", "x = 1")
		recs, _ := e.Contexts.List(context.Background(), contexts.Filter{TenantID: "tenant-a"})
		if len(recs) != 1 {
			t.Fatalf("A's contexts: %d", len(recs))
		}
		req, _ := http.NewRequest("GET", ts.URL+"/v1/contexts/"+recs[0].ID+"/shell", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Sec-WebSocket-Protocol", api.ShellProtocol+", "+api.ShellKeyProtocolPrefix+e.KeyB)
		req.Header.Set("Origin", ts.URL)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 404 {
			t.Fatalf("B's WebSocket to A's context: %d, want 404", res.StatusCode)
		}
	})
	t.Run("key protocol on a plain request", func(t *testing.T) {
		req, _ := http.NewRequest("GET", ts.URL+"/v1/contexts", nil)
		req.Header.Set("Sec-WebSocket-Protocol", api.ShellKeyProtocolPrefix+e.KeyA)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 401 {
			t.Fatalf("status %d, want 401", res.StatusCode)
		}
	})
}
