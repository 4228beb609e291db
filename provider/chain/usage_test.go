package chain_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
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

// renamed is a fake provider under another name: two fakes in one chain
// need two names, as the chain routes by the provider's name.
type renamed struct {
	*contextstest.Provider
	name string
}

func (r renamed) Name() string { return r.name }

// TestUsageOfEveryProvider: the cleanup pass samples each context by the
// provider that made its sandbox: a chain whose first provider cannot
// sample (NotSupported) and whose second can stores the second's sample
// on its context, and leaves the first's empty, quietly (no log line for
// it, no error from the pass).
func TestUsageOfEveryProvider(t *testing.T) {
	ctx := context.Background()
	plain := renamed{contextstest.NewProvider(), "plain"}
	plain.Without, plain.IDPrefix = contexts.CapUsage, "plain-"
	fake := contextstest.NewProvider()
	st := memory.New()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := contexts.NewManager(st, chain.New([]contexts.Provider{plain, fake}, chain.Config{}), contexts.Config{PoolSize: -1, Logger: log})
	defer m.Close(ctx)
	run := func(conv string) *contexts.Record {
		t.Helper()
		id := contexts.Identity{TenantID: "t1", ConversationID: conv, PathID: "main"}
		if _, err := m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: "x = 1"}, nil); err != nil {
			t.Fatal(err)
		}
		rec, err := m.Lookup(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	onPlain := run("c1")
	plain.CreateErr = fmt.Errorf("plain is full: %w", errdefs.ErrUnavailable)
	onFake := run("c2")
	if !strings.HasPrefix(onPlain.SandboxID, "plain:") || !strings.HasPrefix(onFake.SandboxID, "fake:") {
		t.Fatalf("sandboxes %s and %s: want one of each provider", onPlain.SandboxID, onFake.SandboxID)
	}
	if _, err := m.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rec  *contexts.Record
		want contexts.ResourceUsage
	}{{onPlain, contexts.ResourceUsage{}}, {onFake, contexts.ResourceUsage{MemoryBytes: 1 << 20, PIDs: 1}}} {
		got, err := st.Get(ctx, tc.rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceUsage != tc.want {
			t.Errorf("%s: stored usage %+v, want %+v", tc.rec.SandboxID, got.ResourceUsage, tc.want)
		}
	}
	if strings.Contains(logs.String(), onPlain.SandboxID) && strings.Contains(logs.String(), "sample usage") {
		t.Errorf("the pass logged the provider that cannot sample:\n%s", logs.String())
	}
}
