package local

import (
	"context"
	"fmt"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// KeepsMemory reports whether this provider's sandboxes can be
// checkpointed with their memory (Checkpoint, Restore): under runsc.
func (p *Provider) KeepsMemory() bool { return p.rt.CanCheckpoint() }

// Checkpoint saves sandbox sandboxID's memory (its kernels, variables,
// processes) into dir, an empty directory on disk, and stops it: nothing
// of it runs on the host until Restore. Its agent releases the channel
// first (gVisor cannot save the host socket), which ends every connection
// to it, the caller's too. Under crun and runc: failed_precondition.
func (p *Provider) Checkpoint(ctx context.Context, sandboxID, dir string) error {
	if err := runtime.CheckID(sandboxID); err != nil {
		return err
	}
	if !p.rt.CanCheckpoint() {
		return errdefs.Sentence(errdefs.ErrFailedPrecondition, "a memory checkpoint is not supported by runtime %s (runsc only)", p.rt.Name())
	}
	key, err := p.rt.Secret(sandboxID)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	c, err := p.connect(ctx, sandboxID, key, false)
	if err != nil {
		return err
	}
	err = c.Release(ctx)
	c.Close()
	if err != nil {
		return fmt.Errorf("sandbox %s: release the channel: %w", sandboxID, err)
	}
	return p.rt.Checkpoint(ctx, sandboxID, dir, false)
}

// Restore starts checkpointed sandbox sandboxID again from dir and
// returns it connected: its agent listens again, the channel sealed
// once the agent has proved its key, as at create.
func (p *Provider) Restore(ctx context.Context, sandboxID, dir string) (contexts.Sandbox, error) {
	if err := runtime.CheckID(sandboxID); err != nil {
		return nil, err
	}
	key, err := p.rt.Secret(sandboxID)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	if err := p.rt.Restore(ctx, sandboxID, dir); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, p.ready)
	defer cancel()
	c, err := p.connect(rctx, sandboxID, key, true)
	if err != nil {
		return nil, err
	}
	return &Sandbox{c}, nil
}
