package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestForkSandboxMCP: through `sandlot serve` on the real runtime, an MCP
// client forks its conversation's sandbox onto another path with
// fork_sandbox: the fork has the files, not the kernel's variables
// (memory false, said in the result), the source runs on. The walls: a
// fork is always onto a path of the caller's own conversation, so another
// tenant naming the same conversation finds no sandbox to fork and never
// reaches the first's; a caller in another conversation forking onto the
// same path name gets a path of its own conversation, the first's fork
// untouched; a conversation named in the tool's own arguments is refused;
// the source's own path and a path that has a sandbox are refused.
func TestForkSandboxMCP(t *testing.T) {
	runtimePreconditions(t)
	d := startDaemon(t, t.TempDir(), "--image-gc-interval", "0")
	defer d.stop(t)
	otherKey := d.newTenant(t, "other")
	defer d.cleanup(t, d.key, otherKey)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	connect := func(key string) *sdk.ClientSession {
		tr := &sdk.StreamableClientTransport{Endpoint: d.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer(key)}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	a, b := connect(d.key), connect(otherKey)
	defer a.Close() // before the daemon stops: its streams would hold the shutdown
	defer b.Close()
	// call returns the tool's structured result, or its error's text.
	call := func(cs *sdk.ClientSession, tool string, args map[string]any) (map[string]any, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if res.IsError {
			var msg []string
			for _, c := range res.Content {
				if tc, ok := c.(*sdk.TextContent); ok {
					msg = append(msg, tc.Text)
				}
			}
			return nil, strings.Join(msg, " ")
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out, ""
	}
	must := func(cs *sdk.ClientSession, tool string, args map[string]any) map[string]any {
		t.Helper()
		out, msg := call(cs, tool, args)
		if msg != "" || out["success"] == false {
			t.Fatalf("%s %v: %v %s", tool, args, out, msg)
		}
		return out
	}
	must(a, "write_file", map[string]any{"conversationId": "conv", "path": "notes.txt", "content": "before the fork"})
	must(a, "run_code", map[string]any{"conversationId": "conv", "language": "python", "code": "x = 41"})

	f := must(a, "fork_sandbox", map[string]any{"conversationId": "conv", "to_path": "branch"})
	if f["memory"] != false || f["forkPathId"] != "branch" || f["conversationId"] != "conv" || f["contextId"] == f["sourceContextId"] ||
		!strings.Contains(f["notice"].(string), "memory was not kept") {
		t.Fatalf("fork_sandbox: %v", f)
	}
	branch := map[string]any{"conversationId": "conv", "pathId": "branch"}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	if r := must(a, "read_file", with(branch, "path", "notes.txt")); !strings.Contains(r["content"].(string), "before the fork") || r["pathId"] != "branch" {
		t.Errorf("the fork's file: %v", r)
	}
	if r := must(a, "run_code", with(branch, "language", "python", "code", "print('x' in globals())")); r["stdout"] != "False\n" || r["contextId"] != f["contextId"] {
		t.Errorf("the fork's kernel: %v, want fresh", r)
	}
	if r := must(a, "run_code", map[string]any{"conversationId": "conv", "language": "python", "code": "print(x + 1)"}); r["stdout"] != "42\n" {
		t.Errorf("the source after the fork: %v", r)
	}

	// Another tenant naming the same conversation has no sandbox there.
	if out, msg := call(b, "fork_sandbox", map[string]any{"conversationId": "conv", "to_path": "b-branch"}); !strings.Contains(msg, "no sandbox to fork") {
		t.Errorf("another tenant's fork_sandbox on conv: %v %q, want no sandbox to fork", out, msg)
	}
	if out, _ := call(b, "read_file", with(branch, "path", "notes.txt")); out != nil && strings.Contains(jsonText(out), "before the fork") {
		t.Errorf("another tenant read the fork's file: %v", out)
	}
	// Another conversation forking onto the same path name gets its own.
	must(a, "write_file", map[string]any{"conversationId": "conv2", "path": "notes.txt", "content": "conv2's"})
	f2 := must(a, "fork_sandbox", map[string]any{"conversationId": "conv2", "to_path": "branch"})
	if f2["contextId"] == f["contextId"] || f2["conversationId"] != "conv2" {
		t.Errorf("conv2's fork: %v", f2)
	}
	if r := must(a, "read_file", with(branch, "path", "notes.txt")); !strings.Contains(r["content"].(string), "before the fork") {
		t.Errorf("conv's fork after conv2's: %v", r)
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"a conversation in the tool's arguments", map[string]any{"conversationId": "conv", "to_path": "x", "to_conversation": "conv2"}, "unknown field"},
		{"the source's own path", map[string]any{"conversationId": "conv", "to_path": "main"}, "source's own"},
		{"a path that has a sandbox", map[string]any{"conversationId": "conv", "to_path": "branch"}, "already has a context"},
		{"a path without a sandbox", map[string]any{"conversationId": "none", "to_path": "x"}, "no sandbox to fork"},
	} {
		if out, msg := call(a, "fork_sandbox", tc.args); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %v %q, want %q", tc.name, out, msg, tc.want)
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
