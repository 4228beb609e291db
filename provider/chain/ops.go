package chain

import (
	"context"
	"fmt"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

var _ contexts.Pauser = (*Chain)(nil)

// Pause implements contexts.Pauser by the sandbox's provider, when it can
// pause (provider/local); any other is failed_precondition.
func (c *Chain) Pause(ctx context.Context, id string) error {
	pz, inner, err := c.pauser(id)
	if err != nil {
		return err
	}
	return pz.Pause(ctx, inner)
}

// Resume implements contexts.Pauser.
func (c *Chain) Resume(ctx context.Context, id string) error {
	pz, inner, err := c.pauser(id)
	if err != nil {
		return err
	}
	return pz.Resume(ctx, inner)
}

func (c *Chain) pauser(id string) (contexts.Pauser, string, error) {
	p, inner, ok := c.route(id)
	if !ok {
		return nil, "", fmt.Errorf("sandbox %s: no provider of this chain names it: %w", id, errdefs.ErrNotFound)
	}
	pz, ok := p.(contexts.Pauser)
	if !ok {
		return nil, "", fmt.Errorf("provider %s cannot pause sandboxes: %w", p.Name(), errdefs.ErrFailedPrecondition)
	}
	return pz, inner, nil
}
