package contexts_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// getCountingStore counts the store's reads of one record.
type getCountingStore struct {
	contexts.Store
	gets atomic.Int64
}

func (s *getCountingStore) Get(ctx context.Context, id string) (*contexts.Record, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, id)
}

// TestServedReadsTheManagersCopy: Served answers a context this manager
// alone serves from its copy (no store read), with the calls it answered;
// another tenant's is not found; a context it does not hold, and any
// context of a shared provider (every node serves it), are read from the
// store.
func TestServedReadsTheManagersCopy(t *testing.T) {
	for _, shared := range []bool{false, true} {
		gs := &getCountingStore{Store: memory.New()}
		p := contextstest.NewProvider()
		p.Shared = shared
		e := (&env{t: t, ctx: context.Background(), p: p, store: gs, clock: newClock()}).start(contexts.Config{Node: "node-a"})
		id := ident("t1", "c1", "main")
		res := e.exec(id, "x = 1")
		contexts.Settle(e.m)
		gs.gets.Store(0)
		rec, err := e.m.Served(e.ctx, "t1", res.ContextID)
		if err != nil || rec.ID != res.ContextID || rec.ExecutionCount != 1 || !rec.State.Active() {
			t.Fatalf("shared %v: Served: %+v, %v", shared, rec, err)
		}
		if n, want := gs.gets.Load(), map[bool]int64{false: 0, true: 1}[shared]; n != want {
			t.Fatalf("shared %v: Served read the store %d times, want %d", shared, n, want)
		}
		if _, err := e.m.Served(e.ctx, "t2", res.ContextID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("shared %v: another tenant's context: %v, want not_found", shared, err)
		}
		gs.gets.Store(0)
		if _, err := e.m.Served(e.ctx, "t1", "no-such-context"); !errors.Is(err, errdefs.ErrNotFound) || gs.gets.Load() != 1 {
			t.Fatalf("shared %v: unknown context: %v after %d store reads; want not_found from the store", shared, err, gs.gets.Load())
		}
	}
}
