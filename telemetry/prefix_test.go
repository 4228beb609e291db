package telemetry_test

import (
	"context"
	"errors"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/telemetry"
)

// TestPrefixes: the configured application prefix replaces "sandlot" in
// metric names and, when set, starts span names; bad prefixes are refused.
func TestPrefixes(t *testing.T) {
	t.Cleanup(func() { telemetry.SetPrefixes("", "") })
	if got := telemetry.MetricName("sandlot.pool.size"); got != "sandlot.pool.size" {
		t.Fatalf("default metric name %q", got)
	}
	if got := telemetry.SpanName("execution_context.terminate"); got != "execution_context.terminate" {
		t.Fatalf("default span name %q", got)
	}
	if err := telemetry.SetPrefixes("acme", "acme"); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	telemetry.Counter(meter, "sandlot.executions", "x").Add(context.Background(), 1)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if n := rm.ScopeMetrics[0].Metrics[0].Name; n != "acme.executions" {
		t.Fatalf("metric named %q, want acme.executions", n)
	}
	if got := telemetry.SpanName("tool.bash"); got != "acme.tool.bash" {
		t.Fatalf("span name %q", got)
	}
	for _, bad := range [][2]string{{"1x", ""}, {"a.b", ""}, {"ok", "sp ace"}, {"x-y", ""}} {
		if err := telemetry.SetPrefixes(bad[0], bad[1]); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("SetPrefixes(%q, %q) = %v, want invalid_argument", bad[0], bad[1], err)
		}
	}
}
