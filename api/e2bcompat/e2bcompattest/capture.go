package e2bcompattest

import (
	"archive/tar"
	"context"
	"fmt"
	"io"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Capture implements contexts.Provider: an empty layer, for a sandbox the
// fake runs.
func (p *Provider) Capture(ctx context.Context, id string, w io.Writer, max int64) error {
	p.mu.Lock()
	_, ok := p.boxes[id]
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("fake sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return tar.NewWriter(w).Close()
}

// Checkpoint implements contexts.Provider: NotSupported (the fake keeps
// no memory).
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
