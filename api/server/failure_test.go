package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
)

// TestToolRouteLimitIsAResult: over POST /v1/tools/{name}, the
// conversation's context limit reached by a call is a 200 whose result has
// success false and the failure named, which an LLM reads, plainly and
// streamed; not a bare 429.
func TestToolRouteLimitIsAResult(t *testing.T) {
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{PoolSize: -1, MaxPerConversation: 1})
	defer m.Close(context.Background())
	e := newEnv(t, func(c *server.Config) { c.Tools = tools.New(m, tools.Config{}) })
	body := func(path string) map[string]any {
		return map[string]any{"conversationId": "c1", "pathId": path, "args": map[string]any{"language": "python", "code": "1"}}
	}
	if w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: body("main")}); w.Code != 200 {
		t.Fatalf("first call: %d %s", w.Code, w.Body)
	}
	for _, accept := range []string{"", "application/x-ndjson"} {
		w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: body("branch"), header: map[string]string{"Accept": accept}})
		var res struct {
			Success bool
			Error   struct{ Name, Value string }
			PathID  string
			Result  json.RawMessage
		}
		b := w.Body.Bytes()
		if accept != "" {
			var ev struct {
				Type   string
				Result json.RawMessage
			}
			json.Unmarshal(b, &ev)
			b = ev.Result
		}
		if err := json.Unmarshal(b, &res); w.Code != 200 || err != nil || res.Success || res.Error.Name != contexts.FailureLimit || res.PathID != "branch" {
			t.Fatalf("accept %q: %d %s", accept, w.Code, w.Body)
		}
	}
}

// TestToolRouteWithdrawsAfterCreateFailure: a /v1 caller that names its
// request (X-Sandlot-Caller-Request) has the request's code tools
// withdrawn after one of its calls failed to create its sandbox: the next
// call answers the same failure at once, with no create, and GET /v1/tools
// for that request lists none. The same request name of another tenant,
// and calls naming no request, are not affected.
func TestToolRouteWithdrawsAfterCreateFailure(t *testing.T) {
	p := contextstest.NewProvider()
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1})
	defer m.Close(context.Background())
	e := newEnv(t, func(c *server.Config) { c.Tools = tools.New(m, tools.Config{}) })
	hdr := map[string]string{api.HeaderCallerRequest: "turn-7"}
	call := func(key string, h map[string]string) *httptest.ResponseRecorder {
		return e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: key, header: h,
			body: map[string]any{"conversationId": "c1", "args": map[string]any{"language": "python", "code": "1"}}})
	}
	listed := func(key string, h map[string]string) int {
		w := e.do(t, req{method: "GET", path: "/v1/tools", key: key, header: h})
		var ts []json.RawMessage
		if err := json.Unmarshal(w.Body.Bytes(), &ts); w.Code != 200 || err != nil {
			t.Fatalf("GET /v1/tools: %d %s", w.Code, w.Body)
		}
		return len(ts)
	}
	all := listed(e.KeyA, hdr)
	p.FailCreates(1)
	if w := call(e.KeyA, hdr); w.Code != 503 {
		t.Fatalf("the failed create: %d %s", w.Code, w.Body)
	}
	w := call(e.KeyA, hdr) // the provider would succeed now: no create is tried
	if w.Code != 503 || !strings.Contains(w.Body.String(), "withdrawn from this request") || strings.Contains(w.Body.String(), "create failed") {
		t.Fatalf("the next call of the request: %d %s, want the withdrawal in one public sentence (the provider's text stays in the log)", w.Code, w.Body)
	}
	if p.Created() != 0 {
		t.Fatalf("a withdrawn request created %d sandboxes", p.Created())
	}
	if n := listed(e.KeyA, hdr); n != 0 || all == 0 {
		t.Fatalf("GET /v1/tools for the withdrawn request lists %d tools (of %d)", n, all)
	}
	if n := listed(e.KeyA, nil); n != all {
		t.Fatalf("GET /v1/tools naming no request lists %d, want %d", n, all)
	}
	if w := call(e.KeyB, hdr); w.Code != 200 {
		t.Fatalf("another tenant's request of the same name: %d %s", w.Code, w.Body)
	}
	if w := call(e.KeyA, nil); w.Code != 200 {
		t.Fatalf("a call naming no request: %d %s", w.Code, w.Body)
	}
	long := map[string]string{api.HeaderCallerRequest: strings.Repeat("x", 300)}
	if w := call(e.KeyA, long); w.Code != 400 {
		t.Fatalf("an over-long request name: %d %s", w.Code, w.Body)
	}
}
