package contexts_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/telemetry"
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

// TestTenantStats: each tenant's counters are its own (what it created,
// reused, ended and found unhealthy, its active contexts, its creates'
// pool misses); Stats sums every tenant's, with the pool's size.
func TestTenantStats(t *testing.T) {
	e := newEnv(t, contexts.Config{PoolSize: 1})
	waitFor(t, "pool to fill", func() bool { return e.m.Stats().PoolSize == 1 })
	a1 := e.getOrCreate(ident("tA", "c1", "main")) // a pool hit
	e.getOrCreate(ident("tA", "c1", "main"))       // reused
	e.getOrCreate(ident("tA", "c2", "main"))       // a miss or a hit: the refill races it
	if err := e.m.Terminate(e.ctx, "tA", a1.ID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	b1 := e.getOrCreate(ident("tB", "c1", "main"))
	e.m.HealthCheckFailed(b1)

	a := e.m.TenantStats("tA")
	b := e.m.TenantStats("tB")
	if a.Active != 1 || a.TotalCreated != 2 || a.TotalReused != 1 || a.TotalTerminated != 1 || a.HealthCheckFailures != 0 ||
		a.PoolHits+a.PoolMisses != 2 || a.PoolSize != 0 {
		t.Errorf("tenant A's stats = %+v", a)
	}
	if b.Active != 1 || b.TotalCreated != 1 || b.TotalReused != 0 || b.TotalTerminated != 0 || b.HealthCheckFailures != 1 ||
		b.PoolHits+b.PoolMisses != 1 || b.PoolSize != 0 {
		t.Errorf("tenant B's stats = %+v", b)
	}
	if n := e.m.TenantStats("tC"); n.Active != 0 || n.TotalCreated != 0 || len(n.PerTemplate) != 0 {
		t.Errorf("a tenant that did nothing: %+v", n)
	}
	all := e.m.Stats()
	if all.Active != 2 || all.TotalCreated != 3 || all.TotalReused != 1 || all.TotalTerminated != 1 || all.HealthCheckFailures != 1 ||
		all.PoolHits+all.PoolMisses != 3 || all.PerTemplate["default"].TotalCreated != 3 {
		t.Errorf("every tenant's stats = %+v", all)
	}
}

// TestSpecMetricNames: with the specifications' names
// (telemetry.NamesSpec, --telemetry-names spec) the manager's metrics carry
// 001 §8.2's names exactly, without a prefix, the execution duration in
// milliseconds; what the specification does not name keeps sandlot's.
func TestSpecMetricNames(t *testing.T) {
	if err := telemetry.SetNaming(telemetry.Naming{Names: telemetry.NamesSpec}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { telemetry.SetNaming(telemetry.Naming{}) })
	c := newCollector()
	e := newEnv(t, contexts.Config{Meter: c.meter(), PoolSize: -1})
	id := ident("t1", "c1", "main")
	res := e.exec(id, "x = 1")
	e.exec(id, "print(nope)") // a user error
	if err := e.m.Terminate(e.ctx, "t1", res.ContextID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	got := c.values(t)
	want := map[string]float64{
		"execution_context.created.total{provider=fake,template=default}":         1,
		"execution_context.terminated.total{reason=manual}":                       1,
		"execution_context.executions.total{language=python,outcome=ok}":          1,
		"execution_context.executions.total{language=python,outcome=error}":       1,
		"execution_context.execution.errors.total{language=python,outcome=error}": 1,
		"execution_context.execution.duration_ms{language=python} count":          2,
		"execution_context.active.count{}":                                        0,
		"sandlot.execution_context.reused{template=default}":                      1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (collected: %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		for _, old := range []string{"sandlot.executions", "sandlot.execution.duration", "sandlot.execution_context.created", "sandlot.execution_context.active"} {
			if strings.HasPrefix(k, old+"{") || strings.HasPrefix(k, old+" ") {
				t.Errorf("sandlot's name %s beside the specification's", k)
			}
		}
	}
	// The duration's unit is the specification's, and so are its values:
	// the histogram's buckets are in milliseconds (up to 10 minutes).
	var rm metricdata.ResourceMetrics
	if err := c.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "execution_context.execution.duration_ms" {
				continue
			}
			found = true
			h := m.Data.(metricdata.Histogram[float64])
			if m.Unit != "ms" || len(h.DataPoints) == 0 || h.DataPoints[0].Bounds[len(h.DataPoints[0].Bounds)-1] != 600_000 {
				t.Errorf("duration: unit %q, points %+v; want ms, buckets up to 600000", m.Unit, h.DataPoints)
			}
		}
	}
	if !found {
		t.Error("no execution_context.execution.duration_ms")
	}
	if t.Failed() {
		t.Logf("collected: %v", got)
	}
}
