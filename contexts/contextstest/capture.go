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
