package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// TestFailuresAreResults: a call that meets the conversation's or the
// tenant's context limit, or whose sandbox dies under it, comes back as a
// result with success false and the failure named (what an LLM reads), on
// the real manager; the next call after a lost sandbox runs in a fresh one.
func TestFailuresAreResults(t *testing.T) {
	p := contextstest.NewProvider()
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, MaxPerConversation: 1, MaxPerTenant: 2})
	defer m.Close(context.Background())
	r := New(m, Config{})
	call := func(t *testing.T, tool, conv, path, args string) map[string]any {
		t.Helper()
		res, err := r.Call(context.Background(), Call{Name: tool, Identity: contexts.Identity{TenantID: "t1", ConversationID: conv, PathID: path}, Args: json.RawMessage(args)}, nil)
		if err != nil {
			t.Fatalf("%s: an error, want a result: %v", tool, err)
		}
		b, _ := json.Marshal(res)
		var v map[string]any
		json.Unmarshal(b, &v)
		return v
	}
	wantFailure := func(t *testing.T, v map[string]any, kind, text string) {
		t.Helper()
		e, _ := v["error"].(map[string]any)
		if v["success"] != false || e["name"] != kind || !strings.Contains(fmt.Sprint(e["value"]), text) || v["conversationId"] == nil {
			t.Fatalf("result %v, want success false, error %s saying %q, and the path", v, kind, text)
		}
		if _, ok := v["exitCode"]; ok && v["outputType"] != OutputError {
			t.Fatalf("result %v: a failed run's outputType is not error", v)
		}
	}
	code := `{"language":"python","code":"1"}`
	if v := call(t, "run_code", "c1", "main", code); v["success"] != true {
		t.Fatalf("first call: %v", v)
	}
	for _, tool := range []struct{ name, args string }{
		{"run_code", code}, {"bash", `{"command":"true"}`}, {"read_file", `{"path":"x"}`},
		{"run_analysis", `{"analysisType":"custom","parameters":{},"code":"1"}`},
	} {
		t.Run("conversation limit "+tool.name, func(t *testing.T) {
			wantFailure(t, call(t, tool.name, "c1", "branch", tool.args), contexts.FailureLimit, "conversation c1 of tenant t1 has 1 active contexts (limit 1)")
		})
	}
	if v := call(t, "run_code", "c2", "main", code); v["success"] != true {
		t.Fatalf("second conversation: %v", v)
	}
	t.Run("tenant limit", func(t *testing.T) {
		wantFailure(t, call(t, "run_code", "c3", "main", code), contexts.FailureLimit, "tenant t1 has 2 active contexts (limit 2)")
	})
	t.Run("lost sandbox", func(t *testing.T) {
		p.Run = func(ctx context.Context, sb *contextstest.Sandbox, _ agent.RunCodeParams, _ contexts.OutputFunc) (*agent.RunCodeResult, error) {
			p.Kill(sb.ID())
			return nil, fmt.Errorf("connection reset by peer: %w", errdefs.ErrUnavailable)
		}
		v := call(t, "run_code", "c1", "main", code)
		wantFailure(t, v, contexts.FailureLost, "next call starts a fresh sandbox")
		if v["stateLost"] != true || v["outputType"] != OutputError {
			t.Fatalf("a call whose sandbox died under it: %v, want stateLost and outputType error", v)
		}
		if strings.Contains(fmt.Sprint(v), "connection reset") {
			t.Fatalf("the transport error reached the result: %v", v)
		}
		p.Run = nil
		if v := call(t, "run_code", "c1", "main", code); v["success"] != true {
			t.Fatalf("the call after: %v", v)
		}
	})
	t.Run("other errors stay errors", func(t *testing.T) {
		_, err := r.Call(context.Background(), Call{Name: "run_code", Identity: contexts.Identity{TenantID: "t1", ConversationID: "c1"}, Args: json.RawMessage(`{"language":"cobol","code":"1"}`)}, nil)
		if !errdefs.IsClientFault(err) {
			t.Fatalf("bad arguments: %v", err)
		}
	})
}

// TestStateLostInResults: after the sandbox died between calls, the next
// call of run_code, run_analysis and bash runs in a fresh sandbox and its
// result says stateLost with a notice, once; a run that failed (an error
// raised, a timeout) has outputType error.
func TestStateLostInResults(t *testing.T) {
	p := contextstest.NewProvider()
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1})
	defer m.Close(context.Background())
	r := New(m, Config{})
	id := contexts.Identity{TenantID: "t1", ConversationID: "c1", PathID: "main"}
	call := func(t *testing.T, tool, args string) map[string]any {
		t.Helper()
		res, err := r.Call(context.Background(), Call{Name: tool, Identity: id, Args: json.RawMessage(args)}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		b, _ := json.Marshal(res)
		var v map[string]any
		json.Unmarshal(b, &v)
		return v
	}
	for _, tool := range []struct{ name, args string }{
		{"run_code", `{"language":"python","code":"x = 1"}`},
		{"run_analysis", `{"analysisType":"custom","parameters":{},"code":"x = 1"}`},
		{"bash", `{"command":"true"}`},
	} {
		t.Run(tool.name, func(t *testing.T) {
			before := call(t, tool.name, tool.args)
			if before["stateLost"] != nil || before["notice"] != nil {
				t.Fatalf("a call on a live sandbox: %v", before)
			}
			p.Kill(before["sandboxId"].(string))
			v := call(t, tool.name, tool.args)
			if v["success"] != true || v["stateLost"] != true || v["sandboxId"] == before["sandboxId"] ||
				!strings.Contains(fmt.Sprint(v["notice"]), "variables, files and installed packages of earlier calls are gone") {
				t.Fatalf("the call after a kill: %v, want it run in a fresh sandbox with stateLost and a notice", v)
			}
			if again := call(t, tool.name, tool.args); again["stateLost"] != nil {
				t.Fatalf("the loss was told twice: %v", again)
			}
		})
	}
	for _, c := range []struct{ name, code string }{{"raised", "raise ValueError"}, {"timed out", "sleep 5000"}} {
		t.Run(c.name, func(t *testing.T) {
			v := call(t, "run_code", `{"language":"python","code":"`+c.code+`","timeout":1000}`)
			if v["success"] != false || v["outputType"] != OutputError {
				t.Fatalf("%s: %v, want success false and outputType error", c.name, v)
			}
			a := call(t, "run_analysis", `{"analysisType":"custom","parameters":{},"code":"`+c.code+`","timeout":1000}`)
			if a["success"] != false || a["outputType"] != OutputError {
				t.Fatalf("run_analysis %s: %v", c.name, a)
			}
		})
	}
}
