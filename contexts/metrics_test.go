package contexts_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sandlot/sandlot/contexts"
)

// TestMetrics: the manager records each event once, into its own counters
// (Stats) and its OpenTelemetry instruments together, and the gauges read
// Stats; so /v1/metrics/sessions and /metrics agree.
func TestMetrics(t *testing.T) {
	c := newCollector()
	e := newEnv(t, contexts.Config{Meter: c.meter(), MaxExecutionsPerContext: 2, PoolSize: -1})
	id := ident("t1", "c1", "main")
	e.exec(id, "1")
	e.exec(id, "1") // the second call rotates the context
	got := c.values(t)
	want := map[string]float64{
		"sandlot.execution_context.created{provider=fake,template=default}": 1,
		"sandlot.execution_context.reused{template=default}":                1,
		"sandlot.execution_context.terminated{reason=rotated}":              1,
		"sandlot.executions{language=python,outcome=ok}":                    2,
		"sandlot.execution.duration{language=python} count":                 2,
		"sandlot.execution_context.active{}":                                0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (collected: %v), want %v", k, g, ok, v)
		}
	}
	if t.Failed() {
		t.Logf("collected: %v", got)
	}
	st := e.m.Stats()
	if diff := cmp.Diff(contexts.TemplateStats{TotalCreated: 1, TotalReused: 1, TotalTerminated: 1}, st.PerTemplate["default"]); diff != "" {
		t.Errorf("Stats disagree with the instruments (-want +got):\n%s", diff)
	}
}

// collector is an SDK meter provider whose values a test reads.
type collector struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newCollector() *collector {
	r := sdkmetric.NewManualReader()
	return &collector{reader: r, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}
}

func (c *collector) meter() metric.Meter { return c.mp.Meter("test") }

// values collects every data point by name and labels, e.g.
// "sandlot.executions{language=python,outcome=ok}"; a histogram's count is
// under its name and labels plus " count".
func (c *collector) values(t *testing.T) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := c.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name+labels(p.Attributes)] += float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					got[m.Name+labels(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name+labels(p.Attributes)+" count"] += float64(p.Count)
				}
			}
		}
	}
	return got
}

// labels renders attributes as {k=v,...}, sorted.
func labels(s attribute.Set) string {
	out := "{"
	for i, kv := range s.ToSlice() {
		if i > 0 {
			out += ","
		}
		out += string(kv.Key) + "=" + kv.Value.Emit()
	}
	return out + "}"
}
