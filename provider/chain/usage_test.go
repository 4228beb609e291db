package chain_test

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/provider/chain"
	"github.com/sandlot/sandlot/store/memory"
)

// TestUsageThroughChain: a manager whose provider is a chain (what an E2B
// fallback or a quota puts in front of every provider) samples usage like
// one over the provider itself: the cleanup pass stores a sample on the
// record, and Manager.Usage reads one live. The chain used to forward
// pause but not usage, so no record ever got a sample.
func TestUsageThroughChain(t *testing.T) {
	ctx := context.Background()
	fake := contextstest.NewProvider()
	st := memory.New()
	m := contexts.NewManager(st, chain.New([]contexts.Provider{fake}, chain.Config{}), contexts.Config{PoolSize: -1})
	defer m.Close(ctx)
	id := contexts.Identity{TenantID: "t1", ConversationID: "c1", PathID: "main"}
	if _, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "x = 1"}, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := m.Lookup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The fake provider reports 1 MiB per call served.
	live, err := m.Usage(ctx, "t1", rec.ID)
	if err != nil || live.MemoryBytes != 1<<20 {
		t.Fatalf("Manager.Usage through the chain = %+v, %v; want 1 MiB of memory", live, err)
	}
	if _, err := m.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceUsage.MemoryBytes != 1<<20 || got.ResourceUsage.PIDs != 1 {
		t.Fatalf("stored usage after a cleanup pass = %+v; want the fake's sample (1 MiB, 1 pid)", got.ResourceUsage)
	}
}
