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
		Sandlot:    []string{"agent", "agent/internal/...", "agent/kernels", "agent/pid1", "agent/server", "errdefs", "internal/logkey"},
		Forbidden:  forbidden(),
		MaxOutside: 14,  // 12 today
		MaxAll:     150, // 148 today; 190 when it linked TLS
	}.Run(t)
}

// forbidden is what neither agent may link, and TLS: the pod channel's,
// in the pod agent (cmd/sandlot-pod-agent). Linked here it cost every
// local agent ~2.4 ms of CPU at start and ~0.15 MiB of memory
// (docs/decisions/agent-binaries.md).
func forbidden() map[string]string {
	f := deptest.AgentForbidden()
	f["crypto/tls"] = "the local agent speaks on a unix socket: TLS is the pod agent's"
	f["crypto/x509"] = "the local agent makes and checks no certificate"
	return f
}
