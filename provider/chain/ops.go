package chain

import (
	"context"
	"fmt"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// The operations of the contract that act on one sandbox go to the
// provider that made it, named by the id's prefix: the chain performs
// whatever that provider does, and what it does not is its answer
// (contexts.NotSupported naming it). An id no provider of the chain
// names is not_found.

// Capabilities implements contexts.Provider: the operations any provider
// of the chain does (which of them a sandbox has is its own provider's),
// and CapShared only when every provider is shared: one sandbox out of
// another node's reach makes the chain's sandboxes node-bound.
func (c *Chain) Capabilities() contexts.Capabilities {
	var caps contexts.Capabilities
	shared := len(c.providers) > 0
	for _, p := range c.providers {
		pc := p.Capabilities()
		caps |= pc
		shared = shared && pc.Has(contexts.CapShared)
	}
	if !shared {
		caps &^= contexts.CapShared
	}
	return caps
}

// Pause implements contexts.Provider by the sandbox's provider.
func (c *Chain) Pause(ctx context.Context, id string) error {
	_, err := routed(c, id, func(p contexts.Provider, inner string) (struct{}, error) {
		return struct{}{}, p.Pause(ctx, inner)
	})
	return err
}

// Resume implements contexts.Provider by the sandbox's provider.
func (c *Chain) Resume(ctx context.Context, id string) error {
	_, err := routed(c, id, func(p contexts.Provider, inner string) (struct{}, error) {
		return struct{}{}, p.Resume(ctx, inner)
	})
	return err
}

// Usage implements contexts.Provider by the sandbox's provider.
func (c *Chain) Usage(ctx context.Context, id string) (contexts.ResourceUsage, error) {
	return routed(c, id, func(p contexts.Provider, inner string) (contexts.ResourceUsage, error) {
		return p.Usage(ctx, inner)
	})
}

// routed calls op on the provider of chain sandbox id with its own id.
func routed[T any](c *Chain, id string, op func(p contexts.Provider, inner string) (T, error)) (T, error) {
	p, inner, ok := c.route(id)
	if !ok {
		var zero T
		return zero, fmt.Errorf("sandbox %s: no provider of this chain names it: %w", id, errdefs.ErrNotFound)
	}
	return op(p, inner)
}
