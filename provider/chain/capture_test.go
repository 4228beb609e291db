package chain

import (
	"context"
	"io"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
)

func (r *recorder) Capture(_ context.Context, id string, _ io.Writer, _ int64) error {
	r.saw("Capture " + id)
	return nil
}

func (f *fakeProvider) Capture(context.Context, string, io.Writer, int64) error {
	return contexts.NotSupported(f.name, contexts.CapSnapshot)
}

func (r *recorder) Checkpoint(_ context.Context, id string) error {
	r.saw("Checkpoint " + id)
	return nil
}

func (r *recorder) Restore(_ context.Context, id string) (contexts.Sandbox, error) {
	r.saw("Restore " + id)
	return contextstest.NewProvider().Create(context.Background(), contexts.Spec{})
}

func (f *fakeProvider) Checkpoint(context.Context, string) error {
	return contexts.NotSupported(f.name, contexts.CapMemory)
}

func (f *fakeProvider) Restore(context.Context, string) (contexts.Sandbox, error) {
	return nil, contexts.NotSupported(f.name, contexts.CapMemory)
}

func (r *recorder) ForkCheckpoint(_ context.Context, id string) (string, contexts.Sandbox, error) {
	r.saw("ForkCheckpoint " + id)
	sb, err := contextstest.NewProvider().Create(context.Background(), contexts.Spec{})
	return "ck", sb, err
}

func (r *recorder) DropForkCheckpoint(_ context.Context, ck string) error {
	r.saw("DropForkCheckpoint " + ck)
	return nil
}

func (f *fakeProvider) ForkCheckpoint(context.Context, string) (string, contexts.Sandbox, error) {
	return "", nil, contexts.NotSupported(f.name, contexts.CapMemory)
}

func (f *fakeProvider) DropForkCheckpoint(context.Context, string) error {
	return contexts.NotSupported(f.name, contexts.CapMemory)
}
