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
