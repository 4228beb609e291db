package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// Bench runs the store benchmarks: the API's key lookup (every request)
// and the manager's two hot calls, RecordExecution (after every execution)
// and GetActive (every request), serially and in parallel, unscoped
// (system) and tenant-scoped. open must
// return a fresh, empty backend.
func Bench(b *testing.B, open func(b *testing.B) store.Backend) {
	bg := context.Background()
	b.Run("TenantByKeyHash", func(b *testing.B) {
		s := open(b)
		defer s.Close()
		hashes := make([]string, 100)
		for i := range hashes {
			hashes[i] = tenant.HashKey(fmt.Sprint("e2b_bench_", i))
			if err := s.CreateTenant(bg, &tenant.Tenant{Name: fmt.Sprint("t", i)}, hashes[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.TenantByKeyHash(bg, hashes[i%len(hashes)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, scoped := range []bool{false, true} {
		ctx, suffix := bg, ""
		if scoped {
			ctx, suffix = tenant.WithID(bg, "bench-tenant"), "/scoped"
		}
		b.Run("RecordExecution"+suffix, func(b *testing.B) {
			s := open(b)
			defer s.Close()
			rec := seed(b, s, 1)[0]
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now := time.Now()
				if _, err := s.RecordExecution(ctx, rec.ID, 1, time.Millisecond, now, now.Add(30*time.Minute)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("GetActive"+suffix, func(b *testing.B) {
			s := open(b)
			defer s.Close()
			recs := seed(b, s, 100)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.GetActive(ctx, recs[i%len(recs)].Identity); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("GetActiveParallel"+suffix, func(b *testing.B) {
			s := open(b)
			defer s.Close()
			recs := seed(b, s, 100)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := s.GetActive(ctx, recs[i%len(recs)].Identity); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

// seed creates n active records of the bench tenant (plus as many of
// another tenant, so indexes and policies have something to skip).
func seed(b *testing.B, s store.Backend, n int) []*contexts.Record {
	b.Helper()
	var out []*contexts.Record
	for _, tn := range []string{"bench-tenant", "other-tenant"} {
		for i := 0; i < n; i++ {
			rec := &contexts.Record{
				Identity:  contexts.Identity{TenantID: tn, ConversationID: fmt.Sprint("conv-", i), PathID: "main"},
				State:     contexts.StateReady,
				Metadata:  map[string]string{"user": "bench"},
				ExpiresAt: time.Now().Add(time.Hour),
			}
			if err := s.Create(context.Background(), rec); err != nil {
				b.Fatal(err)
			}
			if tn == "bench-tenant" {
				out = append(out, rec)
			}
		}
	}
	return out
}
