package main

import (
	"testing"

	"github.com/sandlot/sandlot/internal/deptest"
)

// TestDeps: the in-sandbox agent links its own packages and the error
// codes, nothing of the daemon: it runs inside every sandbox, and whatever
// it links is attack surface there and weight in every container.
func TestDeps(t *testing.T) {
	deptest.Check{
		Package: deptest.Module + "/cmd/sandlot-agent",
		Env:     []string{"CGO_ENABLED=0"}, // built static
		Sandlot: []string{"agent/...", "errdefs", "internal/logkey"},
		Forbidden: map[string]string{
			"go.opentelemetry.io/...":                    "telemetry belongs to the daemon",
			"github.com/prometheus/...":                  "metrics belong to the daemon",
			"github.com/modelcontextprotocol/...":        "MCP belongs to the daemon",
			"connectrpc.com/...":                         "the E2B wire belongs to the daemon",
			"google.golang.org/protobuf/...":             "the agent speaks JSON-RPC",
			"github.com/jackc/...":                       "stores belong to the daemon",
			"modernc.org/...":                            "stores belong to the daemon",
			"github.com/google/nftables":                 "networks are the daemon's",
			"github.com/vishvananda/...":                 "networks are the daemon's",
			"github.com/google/go-containerregistry/...": "images are the daemon's",
		},
		MaxOutside: 40, // 34 today, of which 25 are esbuild's (TypeScript)
	}.Run(t)
}
