package client_test

import (
	"testing"

	"github.com/sandlot/sandlot/internal/deptest"
)

// TestDeps: the public SDK links the wire types and the error codes and
// nothing else of sandlot, and no third-party module at all, so a program
// that imports it does not link the daemon (the store drivers, OTel,
// Prometheus, the MCP SDK). Counted with `go list -deps`: 191 packages,
// 3 outside the standard library (client, api, errdefs), down from 424
// and 214 when api embedded the daemon's types.
func TestDeps(t *testing.T) {
	deptest.Check{
		Package: deptest.Module + "/client",
		Sandlot: []string{"api", "errdefs"},
		Forbidden: map[string]string{
			"go.opentelemetry.io/...":             "telemetry belongs to the daemon",
			"github.com/prometheus/...":           "metrics belong to the daemon",
			"google.golang.org/protobuf/...":      "the SDK speaks JSON",
			"github.com/modelcontextprotocol/...": "MCP belongs to the daemon",
			"github.com/jackc/...":                "stores belong to the daemon",
			"modernc.org/...":                     "stores belong to the daemon",
			"github.com/google/uuid":              "the server makes ids",
		},
		MaxOutside: 59, // the budget: under 60
		MaxAll:     210,
	}.Run(t)
}
