package desktop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
)

// BenchmarkDesktopCreate measures a desktop session from nothing to its
// first screenshot (sandbox create, X, XFCE until it is drawn, at most the
// stream-ready wait after the window manager, the stream, scrot and the
// read), the "create to first screenshot" (goal: under 3 s on
// crun), and reports the share of creates whose first screenshot showed
// the drawn desktop (drawn/op: the rest ran out of the wait).
func BenchmarkDesktopCreate(b *testing.B) {
	for _, pool := range []int{0, 1} {
		name := map[int]string{0: "cold", 1: "pool"}[pool]
		b.Run(name, func(b *testing.B) {
			dm, cm := newPooled(b, desktop.Config{}, pool)
			ctx := context.Background()
			drawn := 0
			b.ResetTimer()
			for i := range b.N {
				if pool > 0 { // each create from a full pool: wait out the refill
					b.StopTimer()
					for cm.Stats().PerTemplate[desktop.Template].PoolSize < int64(pool) {
						time.Sleep(50 * time.Millisecond)
					}
					b.StartTimer()
				}
				id := contexts.Identity{TenantID: "bench", ConversationID: fmt.Sprintf("create-%d-%d", time.Now().UnixNano(), i), PathID: "main"}
				if _, err := dm.Screenshot(ctx, id); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				tl, err := dm.Timeline(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range tl {
					if p.Name == "drawn" {
						drawn++
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(drawn)/float64(b.N), "drawn/op")
		})
	}
}

// BenchmarkDesktopAction measures one action (a pointer move) and one
// screenshot on a running desktop, and the desktop's memory.
func BenchmarkDesktopAction(b *testing.B) {
	dm, cm := newManagers(b, desktop.Config{})
	ctx := context.Background()
	id := contexts.Identity{TenantID: "bench", ConversationID: fmt.Sprintf("act-%d", time.Now().UnixNano()), PathID: "main"}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		h, err := dm.Health(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if h.OK() || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	b.Run("move", func(b *testing.B) {
		for i := range b.N {
			if _, err := dm.Act(ctx, id, desktop.Action{Kind: "move", X: i % 1000, Y: i % 700}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("screenshot", func(b *testing.B) {
		for range b.N {
			if _, err := dm.Screenshot(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	rec, err := cm.Lookup(ctx, contexts.Identity{TenantID: id.TenantID, ConversationID: id.ConversationID, PathID: desktop.PathPrefix + "main"})
	if err != nil {
		b.Fatal(err)
	}
	if u, err := cm.Usage(ctx, id.TenantID, rec.ID); err == nil {
		b.Logf("one desktop with Chromium open: %d MiB of memory, %d tasks", u.MemoryBytes>>20, u.PIDs)
	}
}
