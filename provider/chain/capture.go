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

// ForkCheckpoint implements contexts.Provider by the sandbox's provider;
// the checkpoint is named as a chain sandbox is (provider, inner name), so
// that DropForkCheckpoint and a Create from it reach that provider.
func (c *Chain) ForkCheckpoint(ctx context.Context, id string) (string, contexts.Sandbox, error) {
	type out struct {
		ck string
		sb contexts.Sandbox
	}
	o, err := routed(c, id, func(p contexts.Provider, inner string) (out, error) {
		ck, sb, err := p.ForkCheckpoint(ctx, inner)
		if err != nil {
			if sb != nil {
				return out{sb: &sandbox{Sandbox: sb, id: id}}, err
			}
			return out{}, err
		}
		return out{p.Name() + sep + ck, &sandbox{Sandbox: sb, id: id}}, nil
	})
	return o.ck, o.sb, err
}

// DropForkCheckpoint implements contexts.Provider by the checkpoint's
// provider.
func (c *Chain) DropForkCheckpoint(ctx context.Context, ck string) error {
	_, err := routed(c, ck, func(p contexts.Provider, inner string) (struct{}, error) {
		return struct{}{}, p.DropForkCheckpoint(ctx, inner)
	})
	return err
}
