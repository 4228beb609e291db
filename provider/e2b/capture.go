package e2b

import (
	"context"
	"io"

	"github.com/sandlot/sandlot/contexts"
)

// Capture implements contexts.Provider: NotSupported (E2B's snapshots are
// templates of its cloud, not a layer sandlot could store).
func (p *Provider) Capture(context.Context, string, io.Writer, int64) error {
	return contexts.NotSupported(p.Name(), contexts.CapSnapshot)
}

// Checkpoint implements contexts.Provider: NotSupported (E2B's pause with
// memory is Pause).
func (p *Provider) Checkpoint(context.Context, string) error {
	return contexts.NotSupported(p.Name(), contexts.CapMemory)
}

// Restore implements contexts.Provider: NotSupported.
func (p *Provider) Restore(context.Context, string) (contexts.Sandbox, error) {
	return nil, contexts.NotSupported(p.Name(), contexts.CapMemory)
}

// ForkCheckpoint implements contexts.Provider: NotSupported.
func (p *Provider) ForkCheckpoint(context.Context, string) (string, contexts.Sandbox, error) {
	return "", nil, contexts.NotSupported(p.Name(), contexts.CapMemory)
}

// DropForkCheckpoint implements contexts.Provider: NotSupported.
func (p *Provider) DropForkCheckpoint(context.Context, string) error {
	return contexts.NotSupported(p.Name(), contexts.CapMemory)
}
