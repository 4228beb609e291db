package local

import (
	"context"
	"io"

	"github.com/sandlot/sandlot/runtime"
)

// Capture implements contexts.Provider: the sandbox's writable layer over
// its image, read by the runtime with the sandbox held still
// (oci.Runtime.Capture).
func (p *Provider) Capture(ctx context.Context, sandboxID string, w io.Writer, max int64) error {
	if err := runtime.CheckID(sandboxID); err != nil {
		return err
	}
	return p.rt.Capture(ctx, sandboxID, w, max)
}
