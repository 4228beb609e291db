package mcp

import (
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/tools"
)

// TestIdentityTaskFirst checks the session-reuse order on MCP: an explicit
// taskId keys the sandbox before conversationId, and both are removed from
// the arguments the tool sees.
func TestIdentityTaskFirst(t *testing.T) {
	s := New(tools.New(nil, tools.Config{}), Config{Tenant: "t1"})
	for _, tc := range []struct {
		name, args, wantConv, wantPath string
	}{
		{"task before conversation", `{"code":"1","conversationId":"c1","taskId":"task-9"}`, "task-9", "main"},
		{"task alone", `{"code":"1","taskId":"task-9","pathId":"b1"}`, "task-9", "b1"},
		{"conversation alone", `{"code":"1","conversationId":"c1"}`, "c1", "main"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "run_code", Arguments: json.RawMessage(tc.args)}}
			id, args, err := s.identity(req)
			if err != nil {
				t.Fatal(err)
			}
			if id.TenantID != "t1" || id.ConversationID != tc.wantConv || id.PathID != tc.wantPath {
				t.Errorf("identity = %+v, want conversation %s path %s", id, tc.wantConv, tc.wantPath)
			}
			if string(args) != `{"code":"1"}` {
				t.Errorf("arguments passed on = %s", args)
			}
		})
	}
	req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "run_code", Arguments: json.RawMessage(`{"taskId":""}`)}}
	if _, _, err := s.identity(req); err == nil {
		t.Error("an empty taskId was accepted")
	}
}
