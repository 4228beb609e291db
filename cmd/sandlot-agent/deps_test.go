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
		// Not agent/typescript: the host transpiles TypeScript.
		Sandlot: []string{"agent", "agent/internal/...", "agent/kernels", "agent/pid1", "agent/server", "errdefs", "internal/logkey"},
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
			"github.com/evanw/esbuild/...":               "the host transpiles TypeScript (agent/typescript)",
			// The agent speaks JSON-RPC on a unix socket; net/http's init
			// was most of a Go binary's start (esbuild's API brought it in).
			"net/http/...": "the agent needs no HTTP library: its one answer (health) is written by hand",
			// TLS is the pod channel's, in the pod agent
			// (cmd/sandlot-pod-agent). Linked here it cost every local
			// agent ~2.4 ms of CPU at start and ~0.15 MiB of memory
			// (docs/decisions/agent-binaries.md).
			"crypto/tls":  "the local agent speaks on a unix socket: TLS is the pod agent's",
			"crypto/x509": "the local agent makes and checks no certificate",
		},
		MaxOutside: 14, // 12 today
	}.Run(t)
}
