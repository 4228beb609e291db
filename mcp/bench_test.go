package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/tools"
)

// BenchmarkRunCode measures one run_code round trip ("x = 1" in a warm
// python kernel of a real agent) directly through the registry and over
// both MCP transports, so the MCP overhead is the difference.
func BenchmarkRunCode(b *testing.B) {
	s := newStackTB(b)
	ctx := context.Background()
	args := map[string]any{"language": "python", "code": "x = 1"}
	b.Run("registry", func(b *testing.B) {
		id := contexts.Identity{TenantID: "bench", ConversationID: "direct", PathID: "main"}
		for i := 0; i < b.N; i++ {
			if _, err := s.reg.Call(ctx, tools.Call{Name: "run_code", Identity: id, Args: []byte(`{"language":"python","code":"x = 1"}`)}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	srv := New(s.reg, Config{Tenant: "bench"})
	b.Run("mcp-inmemory", func(b *testing.B) {
		st, ct := sdk.NewInMemoryTransports()
		go srv.Run(ctx, st)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		for i := 0; i < b.N; i++ {
			if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: args}); err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
	b.Run("mcp-http", func(b *testing.B) {
		hs := httptest.NewServer(srv.HTTPHandler(func(*http.Request) (string, error) { return "bench", nil }))
		defer hs.Close()
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		for i := 0; i < b.N; i++ {
			if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: args}); err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
}
