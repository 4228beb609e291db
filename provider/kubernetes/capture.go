package kubernetes

import (
	"context"
	"io"

	"github.com/sandlot/sandlot/contexts"
)

// Capture implements contexts.Provider: NotSupported (a pod's writable
// layer is the node's container runtime's).
func (p *Provider) Capture(context.Context, string, io.Writer, int64) error {
	return contexts.NotSupported(Name, contexts.CapSnapshot)
}

// Checkpoint implements contexts.Provider: NotSupported.
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
