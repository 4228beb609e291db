package contexts_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// TestTwoManagersOnSharedStore runs two managers, each with its own store
// connection (two daemons), over SQLite and Postgres: concurrent first
// calls create one sandbox, and concurrent cleanups destroy each expired
// sandbox once.
func TestTwoManagersOnSharedStore(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var u string
			if backend == "sqlite" {
				u = "sqlite://" + filepath.Join(t.TempDir(), "sandlot.db")
			} else {
				u = pgtest.SchemaURL(t)
			}
			ctx := context.Background()
			openStore := func() contexts.Store {
				s, err := store.Open(ctx, u)
				if err != nil {
					t.Fatalf("open %s: %v", backend, err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			base := &env{t: t, ctx: ctx, p: contextstest.NewProvider(), clock: newClock()}
			base.p.CreateDelay = 20 * time.Millisecond
			e1, e2 := *base, *base
			e1.store, e2.store = openStore(), openStore()
			e1.start(contexts.Config{})
			e2.start(contexts.Config{})

			id := ident("t1", "race", "main")
			var wg sync.WaitGroup
			var mu sync.Mutex
			seen := map[string]bool{}
			for i := range 20 {
				m := []*contexts.Manager{e1.m, e2.m}[i%2]
				wg.Go(func() {
					res, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					seen[res.ContextID+"/"+res.SandboxID] = true
					mu.Unlock()
				})
			}
			wg.Wait()
			if len(seen) != 1 || len(base.p.Running()) != 1 {
				t.Fatalf("contexts/sandboxes %v, running %v: want one", seen, base.p.Running())
			}
			for _, c := range []string{"a", "b", "c"} {
				e1.getOrCreate(ident("t1", c, "main"))
			}
			base.clock.Advance(time.Hour)
			wg.Go(func() { e1.m.Cleanup(ctx) })
			wg.Go(func() { e2.m.Cleanup(ctx) })
			wg.Wait()
			if got, calls := base.p.Destroyed(), base.p.DestroyCalls(); got != 4 || calls != 4 {
				t.Fatalf("destroyed %d sandboxes in %d calls, want 4 in 4 (each once)", got, calls)
			}
			if c1, c2 := e1.m.Stats().TotalCleaned, e2.m.Stats().TotalCleaned; c1+c2 != 4 {
				t.Fatalf("cleaned %d + %d, want 4", c1, c2)
			}
			if n, err := e1.store.CountActive(ctx, "t1", "", ""); err != nil || n != 0 {
				t.Fatalf("active after cleanup: %d, %v", n, err)
			}
		})
	}
}
