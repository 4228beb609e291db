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
	t.Cleanup(func() { telemetry.SetNaming(telemetry.Naming{}) })
	if got := telemetry.MetricName("sandlot.pool.size"); got != "sandlot.pool.size" {
		t.Fatalf("default metric name %q", got)
	}
	if got := telemetry.SpanName("execution_context.terminate"); got != "execution_context.terminate" {
		t.Fatalf("default span name %q", got)
	}
	if err := telemetry.SetNaming(telemetry.Naming{MetricPrefix: "acme", SpanPrefix: "acme"}); err != nil {
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
		if err := telemetry.SetNaming(telemetry.Naming{MetricPrefix: bad[0], SpanPrefix: bad[1]}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("SetNaming(%q, %q) = %v, want invalid_argument", bad[0], bad[1], err)
		}
	}
}

// TestNaming: sandlot's names by default (tool.run_code), the
// specification's with NamesSpec (compliance.tool.run_code), which no
// span prefix may rename; unknown names are refused.
func TestNaming(t *testing.T) {
	t.Cleanup(func() { telemetry.SetNaming(telemetry.Naming{}) })
	if got := telemetry.ToolSpanName("run_code"); got != "tool.run_code" || telemetry.CurrentNames() != telemetry.NamesSandlot {
		t.Fatalf("default tool span %q, names %q", got, telemetry.CurrentNames())
	}
	if err := telemetry.SetNaming(telemetry.Naming{Names: telemetry.NamesSpec}); err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]string{"run_code": "compliance.tool.run_code", "run_analysis": "compliance.tool.run_analysis"} {
		if got := telemetry.ToolSpanName(tool); got != want {
			t.Errorf("spec names: tool span %q, want %q", got, want)
		}
	}
	if got := telemetry.SpanName("execution_context.get_or_create"); got != "execution_context.get_or_create" {
		t.Errorf("spec names: %q", got)
	}
	if got := telemetry.MetricName("sandlot.pool.size"); got != "sandlot.pool.size" {
		t.Errorf("spec names: sandlot's own metric %q", got)
	}
	for _, bad := range []telemetry.Naming{
		{Names: telemetry.NamesSpec, SpanPrefix: "acme"},
		{Names: "otel"},
	} {
		if err := telemetry.SetNaming(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("SetNaming(%+v) = %v, want invalid_argument", bad, err)
		}
	}
	if telemetry.CurrentNames() != telemetry.NamesSpec {
		t.Error("a refused naming changed the names")
	}
}
