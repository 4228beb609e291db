package toolstest

import (
	"context"
	"io"

	"github.com/sandlot/sandlot/contexts"
)

// Capture implements contexts.Provider: NotSupported.
func (p *HostProvider) Capture(context.Context, string, io.Writer, int64) error {
	return contexts.NotSupported(p.Name(), contexts.CapSnapshot)
}

// Checkpoint implements contexts.Provider: NotSupported.
func (p *HostProvider) Checkpoint(context.Context, string) error {
	return contexts.NotSupported(p.Name(), contexts.CapMemory)
}

// Restore implements contexts.Provider: NotSupported.
func (p *HostProvider) Restore(context.Context, string) (contexts.Sandbox, error) {
	return nil, contexts.NotSupported(p.Name(), contexts.CapMemory)
}

// ForkCheckpoint implements contexts.Provider: NotSupported.
func (p *HostProvider) ForkCheckpoint(context.Context, string) (string, contexts.Sandbox, error) {
	return "", nil, contexts.NotSupported(p.Name(), contexts.CapMemory)
}

// DropForkCheckpoint implements contexts.Provider: NotSupported.
func (p *HostProvider) DropForkCheckpoint(context.Context, string) error {
	return contexts.NotSupported(p.Name(), contexts.CapMemory)
}
