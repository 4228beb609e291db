package tools

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
)

// TestResultsCarryPathRef: every tool's result names the conversation and
// path it ran in, first, as typed fields: the HTTP server and MCP send it as
// it is, so a caller that sent no conversationId learns the generated one.
// A tool added without a case here fails the test.
func TestResultsCarryPathRef(t *testing.T) {
	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{PoolSize: -1, Catalog: keeper{}})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	r := New(m, Config{})
	id := contexts.Identity{TenantID: "t", ConversationID: `conv "1"`, PathID: "branch-2"}
	calls := []struct{ tool, args string }{ // in order: the file tools need write_file first
		{"write_file", `{"path":"a.txt","content":"x y\n"}`},
		{"read_file", `{"path":"a.txt"}`},
		{"edit_file", `{"path":"a.txt","old_string":"x","new_string":"z"}`},
		{"list_files", `{}`},
		{"glob", `{"pattern":"*.txt"}`},
		{"grep", `{"pattern":"z"}`},
		{"run_code", `{"language":"python","code":"1"}`},
		{"run_analysis", `{"analysisType":"custom","parameters":{},"code":"print(1)","outputFormat":"text"}`},
		{"bash", `{"command":"echo hi"}`},
		{"fork_sandbox", `{"to_path":"fork"}`},
		{"suspend_sandbox", `{}`}, // last: it frees the sandbox
	}
	covered := map[string]bool{}
	for _, c := range calls {
		covered[c.tool] = true
		t.Run(c.tool, func(t *testing.T) {
			res, err := r.Call(ctx, Call{Name: c.tool, Identity: id, Args: json.RawMessage(c.args)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"conversationId":"conv \"1\"","pathId":"branch-2",`; !strings.HasPrefix(string(b), want) {
				t.Errorf("result %s does not start with %s", b, want)
			}
		})
	}
	for _, tool := range r.Tools() {
		if !covered[tool.Name] {
			t.Errorf("tool %s has no case here", tool.Name)
		}
	}
}

// keeper is a catalog that keeps suspended contexts' images (nowhere):
// enough for suspend_sandbox to run over the fake provider.
type keeper struct{}

func (keeper) ResolveTemplate(ctx context.Context, tenantID, ref string) (contexts.TemplateInfo, error) {
	return contexts.TemplateInfo{ID: ref, Name: ref}, nil
}

func (keeper) TemplateInfo(ctx context.Context, id string) (contexts.TemplateInfo, error) {
	return contexts.TemplateInfo{ID: id, Name: id}, nil
}

func (keeper) KeepSuspended(ctx context.Context, tenantID, contextID, template string, capture func(ctx context.Context, w io.Writer, max int64) error) (string, int64, error) {
	return "img-" + contextID, 0, capture(ctx, io.Discard, 1<<20)
}

func (keeper) DropSuspended(ctx context.Context, tenantID, id string) error { return nil }

func (keeper) TakeSnapshot(ctx context.Context, tenantID, contextID, template, name string, capture func(ctx context.Context, w io.Writer, max int64) error) (contexts.SnapshotInfo, error) {
	return contexts.SnapshotInfo{ID: "snap-" + contextID, Name: name, ContextID: contextID, Template: template}, capture(ctx, io.Discard, 1<<20)
}

func (keeper) DeleteSnapshot(ctx context.Context, tenantID, id string) error { return nil }
