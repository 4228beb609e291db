package export

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sandlot/sandlot/telemetry"
)

// TestOTLPMetrics: with an OTLP metrics endpoint configured, the metrics
// are pushed over OTLP (HTTP, protobuf) under their instrument names, the
// specification's exactly with --telemetry-names spec
// (execution_context.created.total, execution_context.execution.duration_ms
// in ms), as an OpenTelemetry collector receives them.
func TestOTLPMetrics(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // name -> unit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req colmetrics.ExportMetricsServiceRequest
		if r.URL.Path != "/v1/metrics" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					got[m.Name] = m.Unit
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(nil)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", srv.URL+"/v1/metrics")
	if err := telemetry.SetNaming(telemetry.Naming{Names: telemetry.NamesSpec}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { telemetry.SetNaming(telemetry.Naming{}) })

	ctx := context.Background()
	tel, err := Setup(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	telemetry.Counter(telemetry.Meter(), "execution_context.created.total", "created").Add(ctx, 1)
	telemetry.Histogram(telemetry.Meter(), "execution_context.execution.duration_ms", "duration", "ms", 1, 10).Record(ctx, 3)
	if err := tel.Shutdown(ctx); err != nil { // flushes the periodic reader
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for name, unit := range map[string]string{"execution_context.created.total": "", "execution_context.execution.duration_ms": "ms"} {
		if u, ok := got[name]; !ok || u != unit {
			t.Errorf("OTLP received %s: %v, unit %q; want unit %q (received: %v)", name, ok, u, unit, got)
		}
	}
}
