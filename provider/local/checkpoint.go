package local

import (
	"context"
	"fmt"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// Checkpoint implements contexts.Provider: sandbox sandboxID's memory (its
// kernels, variables, processes) is saved in its bundle, on the state
// dir's disk, and it stops: nothing of it runs on the host until Restore.
// Its agent releases the channel first (gVisor cannot save the host
// socket), which ends every connection to it, the caller's too. Under
// crun and runc, or with Config.NoMemory: NotSupported.
func (p *Provider) Checkpoint(ctx context.Context, sandboxID string) error {
	if err := runtime.CheckID(sandboxID); err != nil {
		return err
	}
	if !p.keepMemory || !p.rt.CanCheckpoint() {
		return contexts.NotSupported(p.Name()+" on "+p.rt.Name(), contexts.CapMemory)
	}
	key, err := p.rt.Secret(sandboxID)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	c, err := p.connect(ctx, sandboxID, key, false)
	if err != nil {
		return err
	}
	err = p.release(ctx, c, true)
	c.Close()
	if err != nil {
		return fmt.Errorf("sandbox %s: release the channel: %w", sandboxID, err)
	}
	return p.rt.Checkpoint(ctx, sandboxID, "")
}

// release has the agent on c let go of its channel, and returns once it
// has (agent.Client.Release), within the provider's ready bound: runsc
// refuses to checkpoint a sandbox while the agent's listener is bound.
// stop: the checkpoint stops the sandbox (agent.ReleaseParams.Stop).
func (p *Provider) release(ctx context.Context, c *agent.Client, stop bool) error {
	ctx, cancel := context.WithTimeout(ctx, p.ready)
	defer cancel()
	return c.ReleaseWith(ctx, agent.ReleaseParams{Stop: stop})
}

// Restore implements contexts.Provider: checkpointed sandbox sandboxID
// starts again and is returned connected: its agent listens again, the
// channel sealed once the agent has proved its key, as at create.
func (p *Provider) Restore(ctx context.Context, sandboxID string) (contexts.Sandbox, error) {
	if err := runtime.CheckID(sandboxID); err != nil {
		return nil, err
	}
	key, err := p.rt.Secret(sandboxID)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	if !p.rt.CanCheckpoint() {
		return nil, contexts.NotSupported(p.Name()+" on "+p.rt.Name(), contexts.CapMemory)
	}
	if err := p.rt.Restore(ctx, sandboxID, ""); err != nil {
		return nil, err
	}
	if p.restoreHook != nil {
		p.restoreHook(sandboxID)
	}
	rctx, cancel := context.WithTimeout(ctx, p.ready)
	defer cancel()
	c, err := p.connect(rctx, sandboxID, key, true)
	if err != nil {
		return nil, err
	}
	return &Sandbox{c}, nil
}
