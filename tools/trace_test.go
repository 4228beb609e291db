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
	"github.com/sandlot/sandlot/telemetry"
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
	res, err := r.Call(ctx, Call{Name: "run_code", Identity: id, Forced: true,
		Args: json.RawMessage(`{"language":"python","code":"1+1"}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sandbox := res.(*RunCodeResult).SandboxID
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
		"app.tenant.id": "t-trace", "app.conversation.id": "c9", "app.path.id": "p2", "sandbox.id": sandbox}
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
	if a := spanAttrs(rf); a["sandbox.id"] != sandbox {
		t.Errorf("tool.read_file sandbox.id = %q, want %q (the call found its sandbox, then the file missing)", a["sandbox.id"], sandbox)
	}
}

// TestSpecSpanNames: with the specifications' names (--telemetry-names
// spec) the tool spans are 000 §8.4's compliance.tool.run_code and
// compliance.tool.run_analysis, with its attributes: the identity,
// sandbox.id, tool.name and tool.forced; the manager's spans keep their
// (the specification's) names under them.
func TestSpecSpanNames(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	if err := telemetry.SetNaming(telemetry.Naming{Names: telemetry.NamesSpec}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { telemetry.SetNaming(telemetry.Naming{}) })

	m := contexts.NewManager(memory.New(), contextstest.NewProvider(), contexts.Config{PoolSize: -1})
	ctx := context.Background()
	defer m.Close(ctx)
	r := New(m, Config{})
	id := contexts.Identity{TenantID: "t-spec", ConversationID: "c1", PathID: "main"}
	res, err := r.Call(ctx, Call{Name: "run_code", Identity: id, Forced: true, Args: json.RawMessage(`{"language":"python","code":"x = 1"}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sandbox := res.(*RunCodeResult).SandboxID
	if _, err := r.Call(ctx, Call{Name: "run_analysis", Identity: id,
		Args: json.RawMessage(`{"analysisType":"custom","parameters":{"n":1},"code":"print(1)"}`)}, nil); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans().Snapshots()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	for tool, forced := range map[string]string{"run_code": "true", "run_analysis": "false"} {
		s, ok := byName["compliance.tool."+tool]
		if !ok {
			t.Errorf("no compliance.tool.%s span (spans: %v)", tool, spanNames(spans))
			continue
		}
		want := map[string]string{"tool.name": tool, "tool.forced": forced, "app.tenant.id": "t-spec",
			"app.conversation.id": "c1", "app.path.id": "main", "sandbox.id": sandbox}
		got := spanAttrs(s)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("compliance.tool.%s %s = %q, want %q", tool, k, got[k], v)
			}
		}
	}
	for _, name := range []string{"tool.run_code", "tool.run_analysis"} {
		if _, ok := byName[name]; ok {
			t.Errorf("sandlot's %s span beside the specification's", name)
		}
	}
	if _, ok := byName["execution_context.get_or_create"]; !ok {
		t.Errorf("no execution_context.get_or_create span: %v", spanNames(spans))
	}
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, a := range s.Attributes() {
		m[string(a.Key)] = a.Value.Emit()
	}
	return m
}

func spanNames(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name())
	}
	return out
}
