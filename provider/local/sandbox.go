package local

import (
	"context"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/typescript"
	"github.com/sandlot/sandlot/contexts"
)

// Sandbox is a local sandbox as the provider hands it out: its agent's
// client, with each TypeScript cell transpiled here, on the host, before
// it reaches the agent (package agent/typescript says why).
type Sandbox struct {
	*agent.Client
	// prio is contexts.Spec.Background's, for a warm pool's sandbox; nil
	// otherwise.
	prio *contexts.Priority
}

// Foreground gives a sandbox created with contexts.Spec.Background (a
// warm pool's) the normal CPU priority; on any other it does nothing. The
// manager calls it when a create takes the sandbox, before the create's
// first request.
func (s *Sandbox) Foreground(ctx context.Context) error {
	if s.prio == nil {
		return nil
	}
	return s.prio.Foreground(ctx)
}

// RunCode implements contexts.Sandbox.
func (s *Sandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out func(agent.OutputEvent)) (*agent.RunCodeResult, error) {
	return typescript.RunCode(ctx, s.Client, p, out)
}
