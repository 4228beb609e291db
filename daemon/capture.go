package daemon

import (
	"context"
	"io"

	"github.com/sandlot/sandlot/contexts"
)

// Capture implements contexts.Provider: no provider, no sandbox.
func (p noProvider) Capture(context.Context, string, io.Writer, int64) error { return p.err }

// Checkpoint implements contexts.Provider: no provider, no sandbox.
func (p noProvider) Checkpoint(context.Context, string) error { return p.err }

// Restore implements contexts.Provider: no provider, no sandbox.
func (p noProvider) Restore(context.Context, string) (contexts.Sandbox, error) { return nil, p.err }

// capture is the manager's Capture as /v1's snapshots call it.
func (d *Daemon) capture(ctx context.Context, tenantID, contextID string, w io.Writer, max int64) error {
	_, err := d.manager.Capture(ctx, tenantID, contextID, w, max)
	return err
}

// ForkCheckpoint implements contexts.Provider: NotSupported.
func (p noProvider) ForkCheckpoint(context.Context, string) (string, contexts.Sandbox, error) {
	return "", nil, p.err
}

// DropForkCheckpoint implements contexts.Provider: NotSupported.
func (p noProvider) DropForkCheckpoint(context.Context, string) error {
	return p.err
}
