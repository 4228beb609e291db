package telemetry_test

import (
	"testing"

	"github.com/sandlot/sandlot/internal/deptest"
)

// TestDeps: instrumentation is the OpenTelemetry API only; the SDK, the
// exporters and Prometheus belong to telemetry/export.
func TestDeps(t *testing.T) {
	deptest.Check{
		Package: deptest.Module + "/telemetry",
		Sandlot: []string{"errdefs"},
		Forbidden: map[string]string{
			"go.opentelemetry.io/otel/sdk/...":       "the SDK is telemetry/export's",
			"go.opentelemetry.io/otel/exporters/...": "exporters are telemetry/export's",
			"github.com/prometheus/...":              "Prometheus is telemetry/export's",
		},
	}.Run(t)
}
