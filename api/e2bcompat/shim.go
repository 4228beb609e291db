package e2bcompat

import (
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// These mirror the Manager API types of docs/architecture.md until the
// manager branch lands; they then become aliases of the contexts types.

// CreateOptions is contexts.CreateOptions.
type CreateOptions struct {
	Template string
	TTL      time.Duration
	Metadata map[string]string
	Env      map[string]string
}

// ExecuteRequest is contexts.ExecuteRequest.
type ExecuteRequest struct {
	Language string
	Code     string
	Timeout  time.Duration
	Kernel   string
	Env      map[string]string
}

// ExecuteResult is contexts.ExecuteResult.
type ExecuteResult struct {
	agent.RunCodeResult
	ContextID string
	SandboxID string
	Identity  contexts.Identity
}
