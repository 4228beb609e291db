package tools

// Scratch: placeholders for contexts.ExecuteRequest/ExecuteResult/CreateOptions
// until the manager branch lands. Deleted after merging manager.

import (
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

type executeRequest struct {
	Language string
	Code     string
	Timeout  time.Duration
	Kernel   string
	Env      map[string]string
}

type executeResult struct {
	agent.RunCodeResult
	ContextID string
	SandboxID string
	Identity  contexts.Identity
}

type createOptions struct {
	Template string
	TTL      time.Duration
	Metadata map[string]string
	Env      map[string]string
}
