package chain

import (
	"context"
	"io"

	"github.com/sandlot/sandlot/contexts"
)

func (r *recorder) Capture(_ context.Context, id string, _ io.Writer, _ int64) error {
	r.saw("Capture " + id)
	return nil
}

func (f *fakeProvider) Capture(context.Context, string, io.Writer, int64) error {
	return contexts.NotSupported(f.name, contexts.CapSnapshot)
}
