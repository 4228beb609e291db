package bench

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
)

// TestManagerOnEnvStore: a case's manager keeps its records in the store
// Env.Store opens (--store), and its stop closes that store.
func TestManagerOnEnvStore(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	opened, closed := 0, 0
	env := Env{Provider: contextstest.NewProvider(), Store: func(context.Context, string) (contexts.Store, func(), error) {
		opened++
		return st, func() { closed++ }, nil
	}}
	m, stop, err := manager(ctx, env, contexts.Config{PoolSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := m.GetOrCreate(ctx, ident("c1"), contexts.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, rec.ID); err != nil {
		t.Fatalf("the context's record is not in the opened store: %v", err)
	}
	stop()
	if opened != 1 || closed != 1 {
		t.Fatalf("store opened %d times and closed %d, want 1 and 1", opened, closed)
	}
}
