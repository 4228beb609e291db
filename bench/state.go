package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/templates"
)

// stateCases are the figures of snapshots (docs/state-snapshots.md) on the image
// provider: a snapshot's capture and store against the bytes its
// sandbox wrote, and a context started from it to its first result (what
// one E2B fork costs per sandbox after its capture).
func stateCases(env Env, sz Sizes) []Case {
	return append([]Case{{Name: "snapshot: capture and store; a context from it", Group: "state", Run: func(ctx context.Context) ([]Figure, error) {
		return snapshotFigures(ctx, env, sz)
	}}}, suspendCases(env, sz)...)
}

func snapshotFigures(ctx context.Context, env Env, sz Sizes) ([]Figure, error) {
	if env.ImageCatalog == nil {
		return nil, fmt.Errorf("no template catalog over the image store")
	}
	img := env
	img.Provider = env.ImageProvider
	m, stop, err := manager(ctx, img, contexts.Config{PoolSize: -1, Catalog: env.ImageCatalog})
	if err != nil {
		return nil, err
	}
	defer stop()
	n := max(3, min(sz.Cold/5, 10))
	var out []Figure
	for _, mib := range []int{1, 32} {
		var snap, from []time.Duration
		var bytes int64
		for i := 0; i < n+1; i++ {
			id := ident(fmt.Sprintf("snap-%d-%d", mib, i))
			res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "bash", Code: fmt.Sprintf("head -c %d /dev/urandom > /home/user/blob && echo 2", mib<<20)}, nil)
			if err != nil {
				return nil, err
			}
			if err := check(res, "2\n"); err != nil {
				return nil, err
			}
			rec, err := m.Lookup(ctx, id)
			if err != nil {
				return nil, err
			}
			t0 := time.Now()
			t, sn, err := env.ImageCatalog.Snapshot(ctx, benchTenant, templates.SnapshotSpec{ContextID: rec.ID, Template: rec.Template},
				func(ctx context.Context, w io.Writer, max int64) error {
					_, err := m.Capture(ctx, benchTenant, rec.ID, w, max)
					return err
				})
			took := time.Since(t0)
			if err != nil {
				return nil, err
			}
			fid := ident(fmt.Sprintf("snap-from-%d-%d", mib, i))
			t1 := time.Now()
			if _, err := m.GetOrCreate(ctx, fid, contexts.CreateOptions{Template: t.ID}); err != nil {
				return nil, err
			}
			res, err = m.Execute(ctx, fid, contexts.ExecuteRequest{Language: "python", Code: "1+1"}, nil)
			if err != nil {
				return nil, err
			}
			first := time.Since(t1)
			if err := check(res, "2"); err != nil {
				return nil, err
			}
			m.Terminate(ctx, benchTenant, rec.ID, contexts.ReasonDeleted)
			m.Terminate(ctx, benchTenant, res.ContextID, contexts.ReasonDeleted)
			env.ImageCatalog.Delete(ctx, benchTenant, t.ID)
			if i > 0 { // the first warms the page cache
				snap, from, bytes = append(snap, took), append(from, first), sn.Bytes
			}
		}
		out = append(out, captureFigure(mib, bytes, snap),
			Latency(fmt.Sprintf("snapshot: a context from it to first python result, %d MiB layer", mib), from))
	}
	return out, nil
}

// captureFigure is the row of a snapshot's capture and store after mib
// MiB written. The layer's size is measured: it goes in the note, so the
// name is the same in every run (a repeated run lines rows up by name).
func captureFigure(mib int, layer int64, snap []time.Duration) Figure {
	f := Latency(fmt.Sprintf("snapshot: capture and store, %d MiB written", mib), snap)
	f.Note = fmt.Sprintf("layer %d KiB", layer>>10)
	return f
}
