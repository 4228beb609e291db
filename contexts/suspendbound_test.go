package contexts_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
)

// hungFake is memoryFake whose capture or checkpoint never answers until
// its context ends: a runtime whose subprocess hangs.
type hungFake struct {
	memoryFake
	hang string // "capture" or "checkpoint"
}

func (p hungFake) Capture(ctx context.Context, id string, w io.Writer, max int64) error {
	if p.hang == "capture" {
		<-ctx.Done()
		return ctx.Err()
	}
	return p.memoryFake.Capture(ctx, id, w, max)
}

func (p hungFake) Checkpoint(ctx context.Context, id string) error {
	if p.hang == "checkpoint" {
		<-ctx.Done()
		return ctx.Err()
	}
	return p.memoryFake.Checkpoint(ctx, id)
}

// TestIdleSuspendOfAHungProvider: a capture or checkpoint that never
// answers holds the idle suspend, and so the cleanup pass (every expiry
// and suspend after it), only for the bound on each. A hung capture
// leaves the context running, for the next pass; a hung checkpoint
// leaves its files kept, as a failed one does. Before the bound the pass
// waited for good.
func TestIdleSuspendOfAHungProvider(t *testing.T) {
	for _, tc := range []struct {
		hang      string
		suspended bool
	}{
		{"capture", false},
		{"checkpoint", true},
	} {
		t.Run(tc.hang, func(t *testing.T) {
			e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
			cfg := contexts.Config{TTL: 10 * time.Minute, IdleSuspend: time.Minute, Clock: e.clock.Now, PoolSize: -1,
				CleanupInterval: time.Hour, Catalog: &keeper{}}
			e.m = contexts.NewManager(e.store, hungFake{memoryFake{Provider: e.p}, tc.hang}, cfg)
			contexts.SetProviderBound(e.m, 100*time.Millisecond)
			if err := e.m.Start(e.ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.m.Close(context.Background()) })
			id := ident("t1", "c", "main")
			rec := e.getOrCreate(id)
			e.exec(id, "x = 41")
			e.clock.Advance(2 * time.Minute)
			within(t, "the cleanup pass", func() {
				if _, err := e.m.Cleanup(e.ctx); err != nil {
					t.Error(err)
				}
			})
			got := e.record(rec.ID)
			if got.Suspended() != tc.suspended || got.KeepsMemory() {
				t.Fatalf("record after the pass: %+v; want suspended %v, memory not kept", got, tc.suspended)
			}
			if !tc.suspended && (got.State != contexts.StateReady || got.SandboxID != rec.SandboxID || !e.running(rec.SandboxID)) {
				t.Fatalf("record after the hung capture: %+v; want ready and running on its sandbox", got)
			}
		})
	}
}
