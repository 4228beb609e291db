package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// testLease: a lease has one holder, who renews it; another takes it once
// it is released or has expired, and never before ttl after the holder's
// last call. Leases are system rows: a tenant-scoped ctx works like an
// unscoped one.
func testLease(t *testing.T, s store.Backend) {
	bg := context.Background()
	for name, ctx := range map[string]context.Context{"unscoped": bg, "tenant-scoped": tenant.WithID(bg, "t")} {
		t.Run(name, func(t *testing.T) {
			lease := "cleanup-" + name
			steps := []struct {
				what   string
				holder string
				want   bool
			}{
				{"a takes a free lease", "a", true},
				{"a renews it", "a", true},
				{"b is refused while a holds it", "b", false},
				{"a renews it again", "a", true},
			}
			for _, st := range steps {
				got, err := s.AcquireLease(ctx, lease, st.holder, time.Hour)
				if err != nil || got != st.want {
					t.Fatalf("%s: AcquireLease = %v, %v; want %v", st.what, got, err, st.want)
				}
			}
			if err := s.ReleaseLease(ctx, lease, "b"); err != nil {
				t.Fatal(err)
			}
			if got, err := s.AcquireLease(ctx, lease, "b", time.Hour); got || err != nil {
				t.Fatalf("b after its release of a's lease: AcquireLease = %v, %v; want false", got, err)
			}
			if err := s.ReleaseLease(ctx, lease, "a"); err != nil {
				t.Fatal(err)
			}
			if got, err := s.AcquireLease(ctx, lease, "b", time.Hour); !got || err != nil {
				t.Fatalf("b after a released: AcquireLease = %v, %v; want true", got, err)
			}
			if got, err := s.AcquireLease(ctx, "other-"+lease, "a", time.Hour); !got || err != nil {
				t.Fatalf("a lease of another name: AcquireLease = %v, %v; want true", got, err)
			}
		})
	}
	t.Run("expiry", func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		start := time.Now()
		if got, err := s.AcquireLease(bg, "expiring", "a", ttl); !got || err != nil {
			t.Fatalf("a: AcquireLease = %v, %v", got, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := s.AcquireLease(bg, "expiring", "b", ttl)
			if err != nil {
				t.Fatal(err)
			}
			if got {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("b never took a's lease after it expired")
			}
			time.Sleep(20 * time.Millisecond)
		}
		// The promise a holder counts on to stop first.
		if took := time.Since(start); took < ttl {
			t.Fatalf("b took a's lease %v after a's call, before its ttl %v", took, ttl)
		}
		if got, err := s.AcquireLease(bg, "expiring", "a", time.Hour); got || err != nil {
			t.Fatalf("a after b took its lease: AcquireLease = %v, %v; want false", got, err)
		}
	})
	for _, tc := range []struct {
		what         string
		name, holder string
		ttl          time.Duration
	}{
		{"no name", "", "a", time.Second},
		{"no holder", "l", "", time.Second},
		{"an over-long name", strings.Repeat("l", 200), "a", time.Second},
		{"an over-long holder", "l", strings.Repeat("a", 200), time.Second},
		{"no time", "l", "a", 0},
	} {
		_, err := s.AcquireLease(bg, tc.name, tc.holder, tc.ttl)
		wantErr(t, "AcquireLease of "+tc.what, err, errdefs.ErrInvalidArgument)
	}
}

// testConcurrentLease: holders racing for a free lease, a round at a
// time: exactly one wins each round.
func testConcurrentLease(t *testing.T, s store.Backend) {
	const holders, rounds = 8, 10
	for r := range rounds {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
		)
		start := make(chan struct{})
		for i := range holders {
			holder := string(rune('a' + i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ok, err := s.AcquireLease(mixedCtx(i, "t"), "race", holder, time.Hour)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					winners = append(winners, holder)
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", r, winners)
		}
		if err := s.ReleaseLease(context.Background(), "race", winners[0]); err != nil {
			t.Fatal(err)
		}
	}
}
