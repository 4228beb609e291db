package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/mcp"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
)

// toolsDaemon is /v1 and MCP over a real manager whose crun sandboxes get
// their networks from the stack: what `sandlot serve --network` serves
// to tool callers.
type toolsDaemon struct {
	m    *contexts.Manager
	reg  *tools.Registry
	url  string
	keys map[string]string // by tenant
}

func newToolsDaemon(t *testing.T, e *env) *toolsDaemon {
	t.Helper()
	p := newProvider(t, "crun", e.st)
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, MaxPerTenant: 20, Networks: e.st, Logger: slog.New(slog.DiscardHandler)})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	reg := tools.New(m, tools.Config{})
	ts := servertest.NewTenants()
	d := &toolsDaemon{m: m, reg: reg, keys: map[string]string{"open": ts.Add("open"), "closed": ts.Add("closed")}}
	srv := httptest.NewServer(server.New(server.Config{Contexts: m, Tools: reg, Auth: tenant.NewAuthenticator(ts, tenant.AuthConfig{})}).Handler())
	t.Cleanup(srv.Close)
	d.url = srv.URL
	return d
}

// call posts a tool call and returns the status and body.
func (d *toolsDaemon) call(t *testing.T, tenantID, tool string, body api.ToolRequest) (int, string) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", d.url+"/v1/tools/"+tool, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+d.keys[tenantID])
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 3 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func bashArgs(cmd string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"command": cmd})
	return b
}

// TestToolNetwork: /v1 tool calls choose the network of the context they
// create; the allowlist holds in the sandbox, the operator's caps refuse
// what the tenant may not have (403, nothing created), a later call with
// another network replaces the policy, and a context created without one
// cannot be given one (412).
func TestToolNetwork(t *testing.T) {
	e := newEnv(t, 1)
	d := newToolsDaemon(t, e)
	allowWWW := &api.Network{Mode: "allowlist", Allow: []string{"www.example.test"}}
	probe := "curl -sS -m 20 http://www.example.test/www; echo; curl -sS -m 20 http://api.test/api; echo"

	code, body := d.call(t, "closed", "bash", api.ToolRequest{ConversationID: "c1", Network: allowWWW, Args: bashArgs(probe)})
	if code != 200 || !strings.Contains(body, `\"Path\":\"/www\"`) || strings.Contains(body, `\"Path\":\"/api\"`) {
		t.Fatalf("allowlist www.example.test: %d %s", code, body)
	}
	// run_code goes through Execute: the same network, the same context.
	code, body = d.call(t, "closed", "run_code", api.ToolRequest{ConversationID: "c1", Network: allowWWW,
		Args: json.RawMessage(`{"language":"python","code":"import urllib.request\nprint(urllib.request.urlopen('http://www.example.test/py', timeout=20).read().decode())"}`)})
	if code != 200 || !strings.Contains(body, `\"Path\":\"/py\"`) {
		t.Fatalf("run_code in the allowlisted context: %d %s", code, body)
	}
	if n := len(e.st.Manager().List()); n != 1 {
		t.Errorf("%d networks after two calls on one context, want 1", n)
	}

	t.Run("caps", func(t *testing.T) {
		code, body := d.call(t, "closed", "bash", api.ToolRequest{ConversationID: "c-open", Network: &api.Network{Mode: "open"}, Args: bashArgs("true")})
		if code != 403 {
			t.Fatalf("mode open for a tenant without it: %d %s", code, body)
		}
		if recs, err := d.m.List(context.Background(), contexts.Filter{TenantID: "closed", ConversationID: "c-open"}); err != nil || len(recs) != 0 {
			t.Errorf("a refused network left %d contexts", len(recs))
		}
		code, body = d.call(t, "open", "bash", api.ToolRequest{ConversationID: "c-open", Network: &api.Network{Mode: "open", Deny: []string{"api.test"}}, Args: bashArgs(probe)})
		if code != 200 || !strings.Contains(body, `\"Path\":\"/www\"`) || strings.Contains(body, `\"Path\":\"/api\"`) {
			t.Fatalf("mode open minus api.test for a tenant with open: %d %s", code, body)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, n := range []*api.Network{
			{Mode: "wide"},
			{Mode: "allowlist", Allow: []string{"exa mple.test"}},
			{Mode: "allowlist", Allow: []string{"*"}},
			{Secrets: []string{"../x"}},
		} {
			if code, body := d.call(t, "closed", "bash", api.ToolRequest{ConversationID: "c-bad", Network: n, Args: bashArgs("true")}); code != 400 {
				t.Errorf("%+v: %d %s", n, code, body)
			}
		}
	})

	t.Run("replaced", func(t *testing.T) {
		both := &api.Network{Mode: "allowlist", Allow: []string{"www.example.test", "api.test"}}
		code, body := d.call(t, "closed", "bash", api.ToolRequest{ConversationID: "c1", Network: both, Args: bashArgs(probe)})
		if code != 200 || !strings.Contains(body, `\"Path\":\"/api\"`) {
			t.Fatalf("a wider allowlist on the existing context: %d %s", code, body)
		}
		// A call naming no network keeps the context's.
		code, body = d.call(t, "closed", "bash", api.ToolRequest{ConversationID: "c1", Args: bashArgs(probe)})
		if code != 200 || !strings.Contains(body, `\"Path\":\"/api\"`) {
			t.Fatalf("no network named: %d %s", code, body)
		}
		rec, err := d.m.GetOrCreate(context.Background(), contexts.Identity{TenantID: "closed", ConversationID: "c1"}, contexts.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p := rec.Network; p == nil || len(p.Allow) != 2 {
			t.Errorf("the record's policy: %+v", p)
		}
		// And back: a narrower allowlist takes api.test away again.
		code, body = d.call(t, "closed", "bash", api.ToolRequest{ConversationID: "c1", Network: allowWWW, Args: bashArgs(probe)})
		if code != 200 || !strings.Contains(body, `\"Path\":\"/www\"`) || strings.Contains(body, `\"Path\":\"/api\"`) {
			t.Fatalf("a narrower allowlist on the existing context: %d %s", code, body)
		}
	})

	t.Run("none then some", func(t *testing.T) {
		if code, body := d.call(t, "closed", "bash", api.ToolRequest{ConversationID: "c-plain", Args: bashArgs("true")}); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		code, body := d.call(t, "closed", "bash", api.ToolRequest{ConversationID: "c-plain", Network: allowWWW, Args: bashArgs(probe)})
		if code != 412 || !strings.Contains(body, "created without a network") {
			t.Fatalf("a network for a context created without one: %d %s", code, body)
		}
	})

	t.Run("mcp", func(t *testing.T) {
		srv := mcp.New(d.reg, mcp.Config{Tenant: "closed"})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		st, ct := sdk.NewInMemoryTransports()
		go srv.Run(ctx, st)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		call := func(meta sdk.Meta) string {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Meta: meta, Name: "bash",
				Arguments: map[string]any{"command": probe, "conversationId": "c-mcp"}})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			return string(b)
		}
		if out := call(sdk.Meta{mcp.MetaNetwork: map[string]any{"mode": "open"}}); !strings.Contains(out, "isError") || !strings.Contains(out, "open") {
			t.Errorf("mode open through MCP for a tenant without it: %s", out)
		}
		if out := call(sdk.Meta{mcp.MetaNetwork: map[string]any{"mode": "allowlist", "allow": []string{"www.example.test"}, "bogus": 1}}); !strings.Contains(out, "isError") {
			t.Errorf("an unknown field in the network: %s", out)
		}
		out := call(sdk.Meta{mcp.MetaNetwork: map[string]any{"mode": "allowlist", "allow": []string{"www.example.test"}}})
		if !strings.Contains(out, `\"Path\":\"/www\"`) || strings.Contains(out, `\"Path\":\"/api\"`) {
			t.Errorf("allowlist through MCP: %s", out)
		}
	})
}
