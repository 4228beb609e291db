package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store"
)

// benchStores gives each manager and daemon the bench starts a store of
// kind: "memory" (the default), or "sqlite", a fresh SQLite file each in
// dir, as serve's default store, so that the figures carry what a daemon's
// store costs a call.
type benchStores struct {
	kind string
	dir  string
	n    atomic.Int64
}

func newBenchStores(kind, dir string) (*benchStores, error) {
	switch kind {
	case "memory", "sqlite":
		return &benchStores{kind: kind, dir: dir}, nil
	}
	return nil, usageErr("--store %q: memory or sqlite", kind)
}

// url is a store URL for one daemon, named name.
func (b *benchStores) url(name string) string {
	if b.kind == "memory" {
		return "memory:"
	}
	return "sqlite://" + filepath.Join(b.dir, fmt.Sprintf("%s-%d.db", name, b.n.Add(1)))
}

// open opens a store for one manager (bench.Env.Store); nil on a memory
// store, which the cases make themselves.
func (b *benchStores) open() func(ctx context.Context, name string) (contexts.Store, func(), error) {
	if b.kind == "memory" {
		return nil
	}
	return func(ctx context.Context, name string) (contexts.Store, func(), error) {
		st, err := store.Open(ctx, b.url(name))
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}
}
