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
