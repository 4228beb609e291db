package tools

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
)

// TestSpans checks the tool.<name> spans over the real manager (fake
// provider): attributes, errors, and the manager's spans nested inside.
func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{PoolSize: -1})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	r := New(m, Config{})
	id := contexts.Identity{TenantID: "t-trace", ConversationID: "c9", PathID: "p2"}
	if _, err := r.Call(ctx, Call{Name: "run_code", Identity: id, Forced: true,
		Args: json.RawMessage(`{"language":"python","code":"1+1"}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Call(ctx, Call{Name: "read_file", Identity: id, Args: json.RawMessage(`{"path":"nope.txt"}`)}, nil); err == nil {
		t.Fatal("read_file of a missing file succeeded")
	}

	spans := exp.GetSpans().Snapshots()
	find := func(name string) sdktrace.ReadOnlySpan {
		for _, s := range spans {
			if s.Name() == name {
				return s
			}
		}
		t.Fatalf("no %s span", name)
		return nil
	}
	run := find("tool.run_code")
	got := map[string]string{}
	for _, a := range run.Attributes() {
		got[string(a.Key)] = a.Value.Emit()
	}
	want := map[string]string{"tool.name": "run_code", "tool.forced": "true", "code.language": "python",
		"app.tenant.id": "t-trace", "app.conversation.id": "c9", "app.path.id": "p2"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("tool.run_code %s = %q, want %q", k, got[k], v)
		}
	}
	if run.Status().Code == codes.Error {
		t.Errorf("tool.run_code status %v", run.Status())
	}
	exec := find("execution_context.execute_code")
	if exec.Parent().SpanID() != run.SpanContext().SpanID() {
		t.Error("execute_code is not a child of tool.run_code")
	}
	rf := find("tool.read_file")
	if rf.Status().Code != codes.Error || len(rf.Events()) == 0 {
		t.Errorf("tool.read_file: status %v events %v, want the error recorded", rf.Status(), rf.Events())
	}
}
