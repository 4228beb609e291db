package contexts_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

var (
	spansOnce sync.Once
	spansExp  *tracetest.InMemoryExporter
)

// spanRecorder installs (once per process) a global tracer provider that
// records into memory, and returns a reader of the spans whose
// app.tenant.id is tenant (tests sharing the process use distinct tenants).
func spanRecorder(t *testing.T) func(tenant string) []sdktrace.ReadOnlySpan {
	spansOnce.Do(func() {
		spansExp = tracetest.NewInMemoryExporter()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spansExp)))
	})
	// Only spans ended after this call count: a test run again in the
	// same process (go test -count=2) reuses its tenant.
	from := len(spansExp.GetSpans())
	return func(tenant string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range spansExp.GetSpans()[from:].Snapshots() {
			for _, a := range s.Attributes() {
				if a.Key == "app.tenant.id" && a.Value.AsString() == tenant {
					out = append(out, s)
				}
			}
		}
		return out
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, a := range s.Attributes() {
		m[a.Key] = a.Value.Emit()
	}
	return m
}

func TestSpans(t *testing.T) {
	spans := spanRecorder(t)
	e := newEnv(t, contexts.Config{})
	id := ident("t-spans", "conv", "main")
	res := e.exec(id, "1+1")
	if err := e.m.Terminate(e.ctx, id.TenantID, res.ContextID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	// An error is recorded on the span.
	_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "cobol", Code: "x"}, nil)
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Execute(cobol) = %v, want invalid_argument", err)
	}

	got := spans("t-spans")
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range got {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	exec := byName["execution_context.execute_code"]
	if len(exec) != 2 {
		t.Fatalf("execute_code spans = %d, want 2 (all: %v)", len(exec), names(got))
	}
	ok, bad := exec[0], exec[1]
	want := map[attribute.Key]string{"app.tenant.id": "t-spans", "app.conversation.id": "conv", "app.path.id": "main",
		"code.language": "python", "sandbox.id": res.SandboxID}
	a := attrs(ok)
	for k, v := range want {
		if a[k] != v {
			t.Errorf("execute_code %s = %q, want %q", k, a[k], v)
		}
	}
	if ok.Status().Code == codes.Error {
		t.Errorf("successful execute_code has status %v", ok.Status())
	}
	if bad.Status().Code != codes.Error || len(bad.Events()) == 0 || bad.Events()[0].Name != "exception" {
		t.Errorf("failed execute_code: status %v, events %v; want an error status and a recorded exception", bad.Status(), bad.Events())
	}

	goc := byName["execution_context.get_or_create"]
	if len(goc) != 1 {
		t.Fatalf("get_or_create spans = %d, want 1 (all: %v)", len(goc), names(got))
	}
	if goc[0].Parent().SpanID() != ok.SpanContext().SpanID() {
		t.Error("get_or_create is not a child of execute_code")
	}
	if a := attrs(goc[0]); a["sandbox.id"] != res.SandboxID || a["app.conversation.id"] != "conv" {
		t.Errorf("get_or_create attributes %v", a)
	}
	term := byName["execution_context.terminate"]
	if len(term) != 1 {
		t.Fatalf("terminate spans %v", term)
	}
	// Terminate knew the context by id only; its span carries what the
	// termination found: identity and sandbox (000 §8.4's attributes).
	wantTerm := map[attribute.Key]string{"execution_context.reason": "manual", "execution_context.id": res.ContextID,
		"app.tenant.id": "t-spans", "app.conversation.id": "conv", "app.path.id": "main", "sandbox.id": res.SandboxID}
	a = attrs(term[0])
	for k, v := range wantTerm {
		if a[k] != v {
			t.Errorf("terminate %s = %q, want %q", k, a[k], v)
		}
	}
}

func TestCleanupSpan(t *testing.T) {
	spanRecorder(t)
	e := newEnv(t, contexts.Config{})
	ctx, root := otel.Tracer("test").Start(context.Background(), "root")
	if _, err := e.m.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	root.End()
	for _, s := range spansExp.GetSpans().Snapshots() {
		if s.Name() == "execution_context.cleanup" && s.Parent().SpanID() == root.SpanContext().SpanID() {
			return
		}
	}
	t.Fatal("no execution_context.cleanup span under the caller's span")
}

func names(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name())
	}
	return out
}

// TestEveryTerminationTraced: each way a context ends, not only a call to
// Terminate, leaves one execution_context.terminate span with its reason
// and reaches Config.OnTerminated (which serve appends to the audit trail);
// total_cleaned counts the idle expiry only.
func TestEveryTerminationTraced(t *testing.T) {
	spans := spanRecorder(t)
	var mu sync.Mutex
	var ended []string
	e := newEnv(t, contexts.Config{MaxExecutionsPerContext: 2, TTL: time.Minute, OnTerminated: func(ctx context.Context, ev contexts.Termination) {
		mu.Lock()
		defer mu.Unlock()
		ended = append(ended, ev.TenantID+" "+string(ev.Reason))
	}})
	// Observers added after the manager was built see the same, in
	// order after Config.OnTerminated; a removed one sees nothing.
	var observed []string
	e.m.OnTerminated(func(ctx context.Context, ev contexts.Termination) {
		mu.Lock()
		defer mu.Unlock()
		if len(observed) == len(ended) {
			t.Errorf("observer told of %s before Config.OnTerminated", ev.ContextID)
		}
		observed = append(observed, ev.TenantID+" "+string(ev.Reason))
	})
	removed := false
	e.m.OnTerminated(func(ctx context.Context, ev contexts.Termination) { removed = true })()
	const tenant = "t-ends"
	// rotated: the second execution uses up MaxExecutions.
	e.exec(ident(tenant, "rot", "main"), "1")
	e.exec(ident(tenant, "rot", "main"), "2")
	// error: a failed health check.
	old := e.exec(ident(tenant, "health", "main"), "1")
	e.p.Kill(old.SandboxID)
	e.exec(ident(tenant, "health", "main"), "2")
	// error: a failed create.
	e.p.FailCreates(1)
	if _, err := e.m.GetOrCreate(e.ctx, ident(tenant, "create", "main"), contexts.CreateOptions{}); err == nil {
		t.Fatal("create did not fail")
	}
	// expired: idle past the TTL, ended by the cleanup loop.
	e.exec(ident(tenant, "idle", "main"), "1")
	e.clock.Advance(2 * time.Minute)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}

	count := map[string]int{}
	for _, s := range spans(tenant) {
		if s.Name() == "execution_context.terminate" {
			count[attrs(s)["execution_context.reason"]]++
		}
	}
	// The idle cleanup ends every context still active then (the health
	// check's replacement and the idle one; the rotated path has none).
	want := map[string]int{"rotated": 1, "error": 2, "expired": 2}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("terminate spans by reason (-want +got):\n%s", diff)
	}
	mu.Lock()
	got := map[string]int{}
	for _, s := range ended {
		got[s]++
	}
	mu.Unlock()
	if diff := cmp.Diff(map[string]int{tenant + " rotated": 1, tenant + " error": 2, tenant + " expired": 2}, got); diff != "" {
		t.Errorf("OnTerminated (-want +got):\n%s", diff)
	}
	mu.Lock()
	if diff := cmp.Diff(ended, observed); diff != "" {
		t.Errorf("Manager.OnTerminated observer (-Config.OnTerminated +observer):\n%s", diff)
	}
	mu.Unlock()
	if removed {
		t.Error("a removed observer was told of a termination")
	}
	if st := e.m.Stats(); st.TotalCleaned != 2 || st.TotalTerminated != 5 {
		t.Errorf("stats: cleaned %d (want 2, idle only), terminated %d (want 5)", st.TotalCleaned, st.TotalTerminated)
	}
}
