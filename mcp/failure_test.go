package mcp

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
)

// TestLimitIsAResult: over MCP, a call that meets the conversation's
// context limit is a normal tool result (not isError) with success false
// and the failure named, which the model reads.
func TestLimitIsAResult(t *testing.T) {
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{PoolSize: -1, MaxPerConversation: 1})
	defer m.Close(context.Background())
	srv := New(tools.New(m, tools.Config{}), Config{Tenant: "t1"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if r := runResult(t, runCode(t, cs, map[string]any{"language": "python", "code": "1"})); !r.Success {
		t.Fatalf("first call: %+v", r)
	}
	res := runCode(t, cs, map[string]any{"language": "python", "code": "1", "pathId": "branch"})
	if res.IsError {
		t.Fatalf("an error, want a result: %s", text(res))
	}
	r := runResult(t, res)
	if r.Success || r.Error == nil || r.Error.Name != contexts.FailureLimit || !strings.Contains(r.Error.Value, "limit 1") || r.PathID != "branch" {
		t.Fatalf("result %+v", r)
	}
}
