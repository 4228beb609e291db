package e2bcompattest

import (
	"archive/tar"
	"context"
	"fmt"
	"io"

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
