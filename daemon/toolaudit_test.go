package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
)

// TestToolCallAudited: every tool call ends as a tool.call event of its
// tenant's trail, naming the tool, the path and the error's category.
func TestToolCallAudited(t *testing.T) {
	st := memory.New()
	w := audit.NewWriter(st, audit.WriterConfig{})
	on := toolAudit(w)
	id := contexts.Identity{TenantID: "t1", ConversationID: "c1", PathID: "main"}
	on(context.Background(), tools.CallEvent{Tool: "run_code", Identity: id, Forced: true, Duration: 42 * time.Millisecond})
	on(context.Background(), tools.CallEvent{Tool: "bash", Identity: id, Err: errors.Join(errdefs.ErrInvalidArgument)})
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := st.ListAudit(context.Background(), "t1", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	for _, ev := range evs {
		if ev.Kind == audit.KindToolCall {
			got = append(got, ev.Detail)
		}
	}
	want := []map[string]string{ // newest first
		{"tool": "bash", "conversation": "c1", "path": "main", "user": "", "forced": "false", "durationMs": "0", "code": "invalid_argument"},
		{"tool": "run_code", "conversation": "c1", "path": "main", "user": "", "forced": "true", "durationMs": "42", "code": ""},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("tool.call events (-want +got):\n%s", d)
	}
	if others, _ := st.ListAudit(context.Background(), "t2", 10); len(others) != 0 {
		t.Fatalf("another tenant's trail got %v", others)
	}
}
