package contexts

import (
	"context"
	"fmt"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
)

// Attacher is a Sandbox that can take over a detached exec
// (agent.ExecParams.Detach) whose connection dropped, as after a daemon
// restart: *agent.Client implements it, and the guarded sandbox Use hands
// out passes it on with its output guarded.
type Attacher interface {
	Attach(ctx context.Context, p agent.AttachParams, out OutputFunc) (*agent.ExecResult, error)
}

// AttachExec takes over the detached exec p names in sb (or in the
// sandbox sb wraps): its output streams to out and its result ends the
// call. A sandbox that has no detached execs (another provider) is
// failed_precondition; a process with nothing to attach to is not_found.
func AttachExec(ctx context.Context, sb Sandbox, p agent.AttachParams, out OutputFunc) (*agent.ExecResult, error) {
	a, ok := sandboxAs[Attacher](sb)
	if !ok {
		return nil, fmt.Errorf("sandbox %s cannot attach to a running process: %w", sb.ID(), errdefs.ErrFailedPrecondition)
	}
	return a.Attach(ctx, p, out)
}

// Attach implements Attacher with the output passing the guard, as Exec's.
func (s *guardedSandbox) Attach(ctx context.Context, p agent.AttachParams, out OutputFunc) (*agent.ExecResult, error) {
	return s.guardedExec(ctx, out, func(fn OutputFunc) (*agent.ExecResult, error) {
		return AttachExec(ctx, s.sb, p, fn)
	})
}

var (
	_ Attacher = (*agent.Client)(nil)
	_ Attacher = (*guardedSandbox)(nil)
)
