package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
)

// failingProvider fails every create while down, counting the attempts.
type failingProvider struct {
	*contextstest.Provider
	down     atomic.Bool
	attempts atomic.Int64
}

func (p *failingProvider) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	p.attempts.Add(1)
	if p.down.Load() {
		return nil, errors.New("runtime down")
	}
	return p.Provider.Create(ctx, spec)
}

// TestCodeToolsWithdrawnFromSession: over both transports, a call whose
// sandbox could not be created withdraws the session's code tools for the
// cool-off: its client is told the list changed, tools/list leaves them
// out, and a call answers the creation failure at once without a second
// create. Another session keeps its tools. When the cool-off ends the
// client is told again and the tools are back.
func TestCodeToolsWithdrawnFromSession(t *testing.T) {
	const cooloff = 2 * time.Second
	p := &failingProvider{Provider: contextstest.NewProvider()}
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1})
	defer m.Close(context.Background())
	srv := New(tools.New(m, tools.Config{CreateCooloff: cooloff}), Config{Tenant: "t1"})
	if in := srv.Instructions(); !strings.Contains(in, "withdrawn from this session for 2s") || !strings.Contains(in, "ephemeral") {
		t.Fatalf("instructions: %s", in)
	}
	hs := httptest.NewServer(srv.HTTPHandler(func(*http.Request) (string, error) { return "t1", nil }))
	defer hs.Close()

	connect := func(t *testing.T, transport string, changed chan<- struct{}) *sdk.ClientSession {
		ctx := context.Background()
		opts := &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}}
		client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts)
		var cs *sdk.ClientSession
		var err error
		if transport == "http" {
			cs, err = client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
		} else {
			st, ct := sdk.NewInMemoryTransports()
			go srv.Run(ctx, st)
			cs, err = client.Connect(ctx, ct, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	count := func(t *testing.T, cs *sdk.ClientSession) int {
		t.Helper()
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(lt.Tools)
	}
	wait := func(t *testing.T, ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("no tools/list_changed %s", what)
		}
	}
	for _, transport := range []string{"inmemory", "http"} {
		t.Run(transport, func(t *testing.T) {
			changed, otherChanged := make(chan struct{}, 4), make(chan struct{}, 4)
			cs, other := connect(t, transport, changed), connect(t, transport, otherChanged)
			all := count(t, cs)
			if all == 0 {
				t.Fatal("no tools")
			}
			if in := cs.InitializeResult().Instructions; in != srv.Instructions() {
				t.Fatalf("the client's instructions: %q", in)
			}
			p.down.Store(true)
			res := runCode(t, cs, map[string]any{"language": "python", "code": "1"})
			// A server fault: one public sentence, its chain in the log.
			if !res.IsError || strings.Contains(text(res), "runtime down") {
				t.Fatalf("the failed create: %s", text(res))
			}
			wait(t, changed, "when the tools were withdrawn")
			if n := count(t, cs); n != 0 {
				t.Fatalf("%d tools listed while withdrawn, want none", n)
			}
			before := p.attempts.Load()
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}})
			if err != nil || !res.IsError || !strings.Contains(text(res), "withdrawn from this request") || strings.Contains(text(res), "runtime down") {
				t.Fatalf("a call while withdrawn: %v %s", err, text(res))
			}
			if p.attempts.Load() != before {
				t.Fatal("a call while withdrawn tried to create")
			}
			// The other session is untouched: its list, its calls.
			if n := count(t, other); n != all {
				t.Fatalf("another session lists %d tools, want %d", n, all)
			}
			select {
			case <-otherChanged:
				t.Fatal("another session was told its list changed")
			default:
			}
			p.down.Store(false)
			if r := runResult(t, runCode(t, other, map[string]any{"language": "python", "code": "1"})); !r.Success {
				t.Fatalf("another session's call: %+v", r)
			}
			wait(t, changed, "when the cool-off ended")
			if n := count(t, cs); n != all {
				t.Fatalf("%d tools listed after the cool-off, want %d", n, all)
			}
			if r := runResult(t, runCode(t, cs, map[string]any{"language": "python", "code": "1"})); !r.Success {
				t.Fatalf("a call after the cool-off: %+v", r)
			}
		})
	}
}
