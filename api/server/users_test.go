package server_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
	"github.com/sandlot/sandlot/tools/toolstest"
)

// realUsersEnv is a server over the real manager (memory store, real
// guard) on real sandlot-agent processes (toolstest.HostProvider).
func realUsersEnv(t *testing.T) (*env, *contexts.Manager) {
	t.Helper()
	toolstest.RequirePython(t)
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := contexts.NewManager(memory.New(), toolstest.NewHostProvider(t), contexts.Config{Guard: g, PoolSize: -1})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return newEnv(t, func(c *server.Config) { c.Contexts, c.Tools = m, tools.New(m, tools.Config{}) }), m
}

// TestUsersIsolated attacks the key (004 §2.1) on /v1: two end users
// behind one tenant key send the same conversationId. They get two
// sandboxes, a file one writes is not there for the other, the same user
// finds its own again, the results and the context listing name the user,
// and ending one user's conversation leaves the other's. (The files
// routes of a user's conversation: TestDaemonUsers, on real sandboxes.)
func TestUsersIsolated(t *testing.T) {
	e, _ := realUsersEnv(t)
	run := func(t *testing.T, user, code string) api.RunCodeResult {
		t.Helper()
		w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: map[string]any{
			"userId": user, "conversationId": "shared-conv", "args": map[string]any{"language": "python", "code": code}}})
		var res api.RunCodeResult
		if err := json.Unmarshal(w.Body.Bytes(), &res); w.Code != 200 || err != nil || !res.Success {
			t.Fatalf("run_code as %q: %d %s", user, w.Code, w.Body)
		}
		return res
	}
	alice := run(t, "alice", `open("mine.txt", "w").write("alice-only"); print("written")`)
	if alice.UserID != "alice" || alice.ConversationID != "shared-conv" {
		t.Fatalf("alice's result names %q/%q", alice.UserID, alice.ConversationID)
	}
	bob := run(t, "bob", `import os; print(os.path.exists("mine.txt"))`)
	if bob.Stdout != "False\n" || bob.SandboxID == alice.SandboxID {
		t.Fatalf("bob sees alice's sandbox: %+v (alice's %s)", bob, alice.SandboxID)
	}
	if again := run(t, "alice", `print(open("mine.txt").read())`); again.Stdout != "alice-only\n" || again.SandboxID != alice.SandboxID {
		t.Fatalf("alice's second call: %+v", again)
	}
	for _, u := range []string{"alice", "bob"} {
		w := e.do(t, req{method: "GET", path: "/v1/contexts?userId=" + u, key: e.KeyA})
		var l api.ContextList
		if err := json.Unmarshal(w.Body.Bytes(), &l); w.Code != 200 || err != nil || len(l.Contexts) != 1 || l.Contexts[0].UserID != u {
			t.Fatalf("contexts of %s: %d %s", u, w.Code, w.Body)
		}
	}
	// Ending bob's conversation leaves alice's.
	w := e.do(t, req{method: "DELETE", path: "/v1/conversations/shared-conv?userId=bob", key: e.KeyA})
	var ended api.ConversationEnded
	if err := json.Unmarshal(w.Body.Bytes(), &ended); w.Code != 200 || err != nil || ended.Terminated != 1 || ended.UserID != "bob" {
		t.Fatalf("end bob's conversation: %d %s", w.Code, w.Body)
	}
	if again := run(t, "alice", `print(open("mine.txt").read())`); again.Stdout != "alice-only\n" {
		t.Fatalf("alice's context after bob's ended: %+v", again)
	}
}

// TestUserValidation: a userId follows the rules of the other identity
// parts, in a body and in a query: past 256 bytes or with a control
// character it is a 400 naming userId.
func TestUserValidation(t *testing.T) {
	e := newEnv(t, nil)
	long := strings.Repeat("u", 257)
	for _, tc := range []struct {
		name string
		r    req
	}{
		{"tool body too long", req{method: "POST", path: "/v1/tools/run_code", body: map[string]any{"userId": long, "conversationId": "c1",
			"args": map[string]any{"language": "python", "code": "1"}}}},
		{"tool body control character", req{method: "POST", path: "/v1/tools/run_code", body: map[string]any{"userId": "a\x01b",
			"args": map[string]any{"language": "python", "code": "1"}}}},
		{"list", req{method: "GET", path: "/v1/contexts?userId=" + long}},
		{"end conversation", req{method: "DELETE", path: "/v1/conversations/c1?userId=a%0Ab"}},
		{"path event", req{method: "POST", path: "/v1/conversations/c1/paths/main/events?userId=" + long, body: map[string]any{"type": "edited"}}},
		{"files", req{method: "GET", path: "/v1/conversations/c1/paths/main/files?path=x&userId=" + long}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.key = e.KeyA
			w := e.do(t, tc.r)
			body, _ := io.ReadAll(w.Body)
			if w.Code != 400 || !strings.Contains(string(body), "userId") {
				t.Fatalf("%d %s", w.Code, body)
			}
		})
	}
	if l, _ := e.Contexts.List(context.Background(), contexts.Filter{}); len(l) != 0 {
		t.Fatalf("refused calls made %d contexts", len(l))
	}
}
