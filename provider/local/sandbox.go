package local

import (
	"context"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/typescript"
)

// Sandbox is a local sandbox as the provider hands it out: its agent's
// client, with each TypeScript cell transpiled here, on the host, before
// it reaches the agent (package agent/typescript says why).
type Sandbox struct{ *agent.Client }

// RunCode implements contexts.Sandbox.
func (s *Sandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out func(agent.OutputEvent)) (*agent.RunCodeResult, error) {
	return typescript.RunCode(ctx, s.Client, p, out)
}
