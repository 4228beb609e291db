package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// TestLeaseTwoDaemons: two stores on one database (two daemons, each with
// its own connection pool) race for one short lease for a while, each
// renewing whenever it can, as the cleanup loop does, and letting it go
// quiet now and then so the other gets a turn. Every grant is a span
// [the call's return, the call's start + ttl) by the winner's clock, the
// time the holder may work; no two spans of different holders overlap, so
// the holders never work at once, and both get the lease at some point.
func TestLeaseTwoDaemons(t *testing.T) {
	u := pgtest.SchemaURL(t)
	stores := []interface {
		AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	}{open(t, u), open(t, u)}
	const ttl = 40 * time.Millisecond
	type span struct {
		holder     string
		from, till time.Time
	}
	var (
		mu     sync.Mutex
		spans  []span
		tenure = map[string]time.Time{} // since when a holder holds it
		quiet  = map[string]time.Time{} // a holder renews nothing until then
		wg     sync.WaitGroup
	)
	stop := time.Now().Add(3 * time.Second)
	for i, s := range stores {
		for g := range 3 { // several goroutines per daemon: several connections each
			holder := []string{"node-a", "node-b"}[i]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					time.Sleep(time.Duration(g+1) * 7 * time.Millisecond)
					mu.Lock()
					wait := time.Now().Before(quiet[holder])
					mu.Unlock()
					if wait {
						continue
					}
					before := time.Now()
					ok, err := s.AcquireLease(context.Background(), "cleanup", holder, ttl)
					if err != nil {
						t.Error(err)
						return
					}
					after := time.Now()
					mu.Lock()
					switch {
					case !ok:
						delete(tenure, holder)
					case tenure[holder].IsZero():
						tenure[holder] = after
					case after.Sub(tenure[holder]) > 5*ttl:
						quiet[holder] = after.Add(3 * ttl)
						delete(tenure, holder)
					}
					if ok {
						spans = append(spans, span{holder, after, before.Add(ttl)})
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	held := map[string]int{}
	for i, a := range spans {
		held[a.holder]++
		for _, b := range spans[i+1:] {
			if a.holder != b.holder && a.from.Before(b.till) && b.from.Before(a.till) {
				t.Fatalf("%s held the lease over [%v, %v) and %s over [%v, %v): two holders at once",
					a.holder, a.from.Format(time.StampMicro), a.till.Format(time.StampMicro),
					b.holder, b.from.Format(time.StampMicro), b.till.Format(time.StampMicro))
			}
		}
	}
	if held["node-a"] == 0 || held["node-b"] == 0 {
		t.Fatalf("grants by holder %v: one daemon never got the lease, the race proved nothing", held)
	}
	t.Logf("grants by holder %v", held)
}
