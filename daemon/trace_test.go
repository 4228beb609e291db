package daemon

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sandlot/sandlot/telemetry/export"
)

// TestRequestJoinsCallerTrace: a request carrying a W3C traceparent gets a
// server span in the caller's trace, named after its route.
func TestRequestJoinsCallerTrace(t *testing.T) {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tel, err := export.Setup(ctx, export.Config{SpanExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)

	e := newEnv(t, nil)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	rec := e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyA,
		header: map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}})
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/contexts: %d %s", rec.Code, rec.Body)
	}
	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, s := range exp.GetSpans() {
		if s.Name == "GET /v1/contexts" {
			found = true
			if got := s.SpanContext.TraceID().String(); got != traceID {
				t.Errorf("span trace id = %s, want the caller's %s", got, traceID)
			}
			if s.Parent.SpanID().String() != "00f067aa0ba902b7" {
				t.Errorf("span parent = %s, want the caller's span", s.Parent.SpanID())
			}
		}
	}
	if !found {
		t.Fatalf("no server span named %q among %d spans", "GET /v1/contexts", len(exp.GetSpans()))
	}
}
