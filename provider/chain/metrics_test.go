package chain

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/provider/e2b"
)

// TestMetrics: the chain counts its fallbacks by provider and error code,
// and its quota records the used share at each threshold: instruments of
// their own, with no hook for the caller to wire.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	q, err := NewQuota(QuotaConfig{Plans: map[string]Plan{"local": {Creations: 2}}, Thresholds: []float64{0.5, 1}, Meter: meter})
	if err != nil {
		t.Fatal(err)
	}
	c := New([]contexts.Provider{e2b.New(e2b.Config{}), &fakeProvider{name: "local"}}, Config{Quota: q, Meter: meter})
	for range 2 {
		if _, err := c.Create(context.Background(), contexts.Spec{Labels: map[string]string{"sandlot.tenant": "t1"}}); err != nil {
			t.Fatal(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var fallbacks int64
	var share float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if m.Name == "sandlot.provider.fallbacks" && p.Attributes.Equals(attrSet("provider", "e2b", "reason", "unavailable")) {
						fallbacks += p.Value
					}
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					if m.Name == "sandlot.quota.usage" && p.Attributes.Equals(attrSet("kind", "creations", "provider", "local", "tenant", "t1")) {
						share = p.Value
					}
				}
			}
		}
	}
	if fallbacks != 2 {
		t.Errorf("fallbacks from e2b counted %d, want 2", fallbacks)
	}
	if share != 1 {
		t.Errorf("quota usage gauge %v, want 1 (2 of 2 creations)", share)
	}
}

func attrSet(kv ...string) *attribute.Set {
	var attrs []attribute.KeyValue
	for i := 0; i+1 < len(kv); i += 2 {
		attrs = append(attrs, attribute.String(kv[i], kv[i+1]))
	}
	s := attribute.NewSet(attrs...)
	return &s
}
