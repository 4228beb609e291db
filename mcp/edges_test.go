package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/errdefs/errdefstest"
)

// TestErrorEdge walks every category through MCP's two error shapes: a
// tool error result (isError, one text) and the HTTP answer to a request
// refused before the protocol (status and {code, message}). Each shows
// one public sentence without the chain's internals.
func TestErrorEdge(t *testing.T) {
	s := newStack(t)
	srv := New(s.reg, Config{})
	for _, c := range errdefstest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			res := toolError(c.Err)
			if !res.IsError {
				t.Error("not a tool error")
			}
			errdefstest.Check(t, "MCP tool error", c, text(res))

			h := srv.HTTPHandler(func(*http.Request) (string, error) { return "", c.Err })
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", "/mcp", nil))
			var body struct{ Code, Message string }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("HTTP body %q: %v", w.Body, err)
			}
			if w.Code != c.Status || body.Code != string(c.Code) {
				t.Errorf("HTTP: %d %s, want %d %s", w.Code, body.Code, c.Status, c.Code)
			}
			errdefstest.Check(t, "MCP over HTTP", c, body.Message)
		})
	}
}

// TestUnknownArgument: a misspelt argument names the arguments the tool
// takes over MCP (its own and the identity ones), and the server tells
// clients its version.
func TestUnknownArgument(t *testing.T) {
	s := newStack(t)
	srv := New(s.reg, Config{Tenant: "tenant-stdio", Version: "v1.2.3-test"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, clientOptions()).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Version; got != "v1.2.3-test" {
		t.Errorf("serverInfo.version %q", got)
	}
	res := runCode(t, cs, map[string]any{"lang": "python", "code": "1"})
	want := `run_code: unknown field "lang" (allowed: code, conversationId, description, env, ipython, language, pathId, taskId, template, timeout)`
	if !res.IsError || text(res) != want {
		t.Errorf("tool error %v %q, want %q", res.IsError, text(res), want)
	}
}
