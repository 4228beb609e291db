package main

import (
	"testing"

	"github.com/sandlot/sandlot/internal/deptest"
)

// TestDeps: the pod agent links what the local agent links plus the pod
// channel's TLS, and nothing of the daemon: it runs in every pod.
func TestDeps(t *testing.T) {
	deptest.Check{
		Package:    deptest.Module + "/cmd/sandlot-pod-agent",
		Env:        []string{"CGO_ENABLED=0"}, // built static
		Sandlot:    []string{"agent", "agent/internal/...", "agent/kernels", "agent/pid1", "agent/podchannel", "agent/podtls", "agent/server", "errdefs", "internal/logkey"},
		Forbidden:  deptest.AgentForbidden(),
		MaxOutside: 16, // 14 today
	}.Run(t)
}
