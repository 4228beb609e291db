package contexts_test

import (
	"fmt"
	"testing"

	"github.com/sandlot/sandlot/contexts"
)

// TestRealPoolServesBurst: on the local provider, a burst of creates grows
// the warm pool past its size (a pool of 2 that drained at the first two
// before), and a second burst as large is served from it whole, each
// context answering its first call. The clock stands still, so the rate
// the pool grows by is the burst's and does not fall while the machine
// makes the sandboxes.
func TestRealPoolServesBurst(t *testing.T) {
	const burst = 5
	clk := newClock()
	e := newRealEnv(t, contexts.Config{PoolSize: 2, Clock: clk.Now, MaxPerTenant: -1, MaxPerConversation: -1})
	e.waitStats("the pool to fill", func() bool { return e.m.Stats().PoolSize == 2 })
	for i := range burst + 1 { // burst+1 at one instant: burst a second
		if _, err := e.m.GetOrCreate(e.ctx, ident("t1", fmt.Sprintf("a%d", i), "main"), contexts.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitStats("the pool to grow", func() bool { return e.m.Stats().PoolSize >= burst })
	hits := e.m.Stats().PoolHits
	var ids []contexts.Identity
	for i := range burst {
		id := ident("t1", fmt.Sprintf("b%d", i), "main")
		if _, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if got := e.m.Stats().PoolHits - hits; got != burst {
		t.Fatalf("a burst of %d after the pool grew: %d served from it", burst, got)
	}
	for _, id := range ids {
		if res := e.exec(id, "python", "print(6*7)"); res.Stdout != "42\n" {
			t.Fatalf("%v: %+v", id, res)
		}
	}
}
