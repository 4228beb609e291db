package server_test

import (
	"context"
	"encoding/json"
	"testing"

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
