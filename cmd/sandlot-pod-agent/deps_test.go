package main

import (
	"testing"

	"github.com/sandlot/sandlot/internal/deptest"
)

// TestDeps: the pod agent links what the local agent links plus the pod
// channel's TLS, and nothing of the daemon: it runs in every pod.
func TestDeps(t *testing.T) {
	deptest.Check{
		Package: deptest.Module + "/cmd/sandlot-pod-agent",
		Env:     []string{"CGO_ENABLED=0"}, // built static
		Sandlot: []string{"agent", "agent/internal/...", "agent/kernels", "agent/pid1", "agent/podchannel", "agent/podtls", "agent/server", "errdefs", "internal/logkey"},
		Forbidden: map[string]string{
			"go.opentelemetry.io/...":                    "telemetry belongs to the daemon",
			"github.com/prometheus/...":                  "metrics belong to the daemon",
			"github.com/modelcontextprotocol/...":        "MCP belongs to the daemon",
			"connectrpc.com/...":                         "the E2B wire belongs to the daemon",
			"google.golang.org/protobuf/...":             "the agent speaks JSON-RPC",
			"github.com/jackc/...":                       "stores belong to the daemon",
			"modernc.org/...":                            "stores belong to the daemon",
			"k8s.io/...":                                 "the cluster is the daemon's to talk to",
			"github.com/google/go-containerregistry/...": "images are the daemon's",
			"net/http/...":                               "the agent needs no HTTP library: its one answer (health) is written by hand",
		},
		MaxOutside: 16, // 14 today
	}.Run(t)
}
