package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/tools"
)

// TestUsersIsolated attacks the key (004 §2.1): two end users behind one
// tenant send the same conversationId over one MCP session, each naming
// itself in _meta. They get two sandboxes, and a file one writes is not
// there for the other; the same user finds its own again, and its result
// names it.
func TestUsersIsolated(t *testing.T) {
	s := newStack(t)
	srv := New(s.reg, Config{Tenant: "tenant-users"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	run := func(t *testing.T, user, code string) tools.RunCodeResult {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
		defer ccancel()
		res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "run_code",
			Arguments: map[string]any{"language": "python", "conversationId": "shared-conv", "code": code},
			Meta:      sdk.Meta{MetaUser: user}})
		if err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		return runResult(t, res)
	}
	alice := run(t, "alice", `open("mine.txt", "w").write("alice-only"); print("written")`)
	if !alice.Success || alice.UserID != "alice" || alice.ConversationID != "shared-conv" {
		t.Fatalf("alice's write: %+v", alice)
	}
	bob := run(t, "bob", `import os; print(os.path.exists("mine.txt"))`)
	if bob.Stdout != "False\n" || bob.UserID != "bob" {
		t.Fatalf("bob sees alice's file: %+v", bob)
	}
	if bob.SandboxID == alice.SandboxID {
		t.Fatalf("alice and bob share sandbox %s", bob.SandboxID)
	}
	if again := run(t, "alice", `print(open("mine.txt").read())`); again.Stdout != "alice-only\n" || again.SandboxID != alice.SandboxID {
		t.Fatalf("alice's second call: %+v", again)
	}
	for _, u := range []string{"alice", "bob"} {
		recs, err := s.manager.List(ctx, contexts.Filter{TenantID: "tenant-users", UserID: u})
		if err != nil || len(recs) != 1 || recs[0].ConversationID != "shared-conv" {
			t.Fatalf("contexts of %s: %v, %v", u, recs, err)
		}
	}
}

// TestUserMeta: the user comes from _meta (the client application's), the
// session's default otherwise, and is checked like every identity part; a
// userId argument is the tool's, not the key's.
func TestUserMeta(t *testing.T) {
	s := New(tools.New(nil, tools.Config{}), Config{Tenant: "t1", User: "session-user"})
	for _, tc := range []struct {
		name     string
		meta     sdk.Meta
		wantUser string
		wantErr  string
	}{
		{"session default", nil, "session-user", ""},
		{"meta names one", sdk.Meta{MetaUser: "alice"}, "alice", ""},
		{"meta names none", sdk.Meta{MetaUser: ""}, "", ""},
		{"not a string", sdk.Meta{MetaUser: 7}, "", "must be a string"},
		{"too long", sdk.Meta{MetaUser: strings.Repeat("u", 257)}, "", "longer than 256 bytes"},
		{"control character", sdk.Meta{MetaUser: "a\x00b"}, "", "control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &sdk.CallToolParamsRaw{Name: "run_code", Arguments: json.RawMessage(`{"code":"1","conversationId":"c1"}`)}
			p.SetMeta(map[string]any(tc.meta))
			id, _, err := s.identity(&sdk.CallToolRequest{Params: p})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || id.UserID != tc.wantUser || id.ConversationID != "c1" {
				t.Fatalf("identity = %+v, %v; want user %q", id, err, tc.wantUser)
			}
		})
	}
}
