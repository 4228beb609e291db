package chain

import (
	"context"
	"io"

	"github.com/sandlot/sandlot/contexts"
)

// Capture implements contexts.Provider by the sandbox's provider.
func (c *Chain) Capture(ctx context.Context, id string, w io.Writer, max int64) error {
	_, err := routed(c, id, func(p contexts.Provider, inner string) (struct{}, error) {
		return struct{}{}, p.Capture(ctx, inner, w, max)
	})
	return err
}

// Checkpoint implements contexts.Provider by the sandbox's provider.
func (c *Chain) Checkpoint(ctx context.Context, id string) error {
	_, err := routed(c, id, func(p contexts.Provider, inner string) (struct{}, error) {
		return struct{}{}, p.Checkpoint(ctx, inner)
	})
	return err
}

// Restore implements contexts.Provider by the sandbox's provider; the
// sandbox keeps the chain's id.
func (c *Chain) Restore(ctx context.Context, id string) (contexts.Sandbox, error) {
	return routed(c, id, func(p contexts.Provider, inner string) (contexts.Sandbox, error) {
		sb, err := p.Restore(ctx, inner)
		if err != nil {
			return nil, err
		}
		return &sandbox{Sandbox: sb, id: id}, nil
	})
}
