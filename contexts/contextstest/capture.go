package contextstest

import (
	"archive/tar"
	"context"
	"io"

	"github.com/sandlot/sandlot/contexts"
)

// Capture implements contexts.Provider: an empty layer, for a sandbox the
// fake runs.
func (p *Provider) Capture(ctx context.Context, id string, w io.Writer, max int64) error {
	if _, err := p.running(id, contexts.CapSnapshot); err != nil {
		return err
	}
	return tar.NewWriter(w).Close()
}

// Checkpoint implements contexts.Provider: NotSupported (the fake keeps
// no memory).
func (p *Provider) Checkpoint(ctx context.Context, id string) error {
	return contexts.NotSupported(p.Name(), contexts.CapMemory)
}

// Restore implements contexts.Provider: NotSupported.
func (p *Provider) Restore(ctx context.Context, id string) (contexts.Sandbox, error) {
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
