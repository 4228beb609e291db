package tenant

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// gated is a lookup whose key lookups wait on gate when it is set, and
// that records KeyUsed calls.
type gated struct {
	lookup
	gate    chan struct{}
	entered chan struct{}
	usedMu  sync.Mutex
	used    []time.Time
	// useGate, when set, holds every KeyUsed until it is closed.
	useGate chan struct{}
}

func (g *gated) TenantByKeyHash(ctx context.Context, h string) (*Tenant, error) {
	if g.gate != nil {
		g.entered <- struct{}{}
		<-g.gate
	}
	return g.lookup.TenantByKeyHash(ctx, h)
}

func (g *gated) KeyUsed(_ context.Context, _ string, at time.Time) error {
	if g.useGate != nil {
		<-g.useGate
	}
	g.usedMu.Lock()
	defer g.usedMu.Unlock()
	g.used = append(g.used, at)
	return nil
}

// TestAuthenticatorForget: a revoked key (its hash deleted, then
// forgotten) is refused by the next call though the cache held it, and a
// lookup that began before Forget does not put its answer back.
func TestAuthenticatorForget(t *testing.T) {
	ctx := context.Background()
	key, _ := NewKey()
	tn := &Tenant{ID: "t1"}
	g := &gated{lookup: lookup{byHash: map[string]*Tenant{HashKey(key): tn}}}
	a := NewAuthenticator(g, AuthConfig{CacheTTL: time.Hour})
	if _, err := a.Key(ctx, key); err != nil {
		t.Fatal(err)
	}
	revoke := func() {
		g.mu.Lock()
		delete(g.byHash, HashKey(key))
		g.mu.Unlock()
		a.Forget(HashKey(key))
	}
	revoke()
	if _, err := a.Key(ctx, key); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Fatalf("a forgotten key: %v, want unauthenticated", err)
	}

	// A lookup in flight across the revocation: it read the key before the
	// delete, so it answers the tenant once, but must not cache it.
	g.mu.Lock()
	g.byHash[HashKey(key)] = tn
	g.mu.Unlock()
	g.gate, g.entered = make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() { _, err := a.Key(ctx, key); done <- err }()
	<-g.entered
	g.mu.Lock()
	answer := g.byHash[HashKey(key)] // what the store read returns
	g.mu.Unlock()
	a.Forget(HashKey(key)) // the revocation lands while the read is out
	close(g.gate)
	if err := <-done; err != nil || answer == nil {
		t.Fatalf("the read in flight: %v", err)
	}
	g.gate = nil
	g.mu.Lock()
	delete(g.byHash, HashKey(key))
	g.mu.Unlock()
	if _, err := a.Key(ctx, key); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Fatalf("a key whose lookup raced its revocation was cached: %v", err)
	}
}

// TestAuthenticatorKeyUsed: a key's use is written once per
// KeyUseInterval, however often it authenticates.
func TestAuthenticatorKeyUsed(t *testing.T) {
	ctx := context.Background()
	key, _ := NewKey()
	g := &gated{lookup: lookup{byHash: map[string]*Tenant{HashKey(key): {ID: "t1"}}}}
	clk := &clock{now: time.Unix(1000, 0)}
	a := NewAuthenticator(g, AuthConfig{Clock: clk.Now})
	for _, step := range []time.Duration{0, time.Second, 30 * time.Second, 30 * time.Second, time.Second} {
		clk.now = clk.now.Add(step)
		if _, err := a.Key(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []time.Time{time.Unix(1000, 0), time.Unix(1061, 0)}
	if len(g.used) != len(want) || !g.used[0].Equal(want[0]) || !g.used[1].Equal(want[1]) {
		t.Fatalf("uses written at %v, want %v", g.used, want)
	}
}

// TestKeyUseOffRequestPath: a store slow to record a key's use delays no
// request. The write runs in the background and lands when the store
// answers; with every write slot taken, further uses are dropped and
// written by a later request.
func TestKeyUseOffRequestPath(t *testing.T) {
	ctx := context.Background()
	g := &gated{lookup: lookup{byHash: map[string]*Tenant{}}, useGate: make(chan struct{})}
	keys := make([]string, keyUseWrites+2)
	for i := range keys {
		keys[i], _ = NewKey()
		g.byHash[HashKey(keys[i])] = &Tenant{ID: "t1"}
	}
	clk := &clock{now: time.Unix(1000, 0)}
	a := NewAuthenticator(g, AuthConfig{Clock: clk.Now})
	done := make(chan error, 1)
	go func() {
		for _, k := range keys {
			if _, err := a.Key(ctx, k); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("requests waited for the store to record their keys' use")
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := a.Wait(short); err == nil {
		t.Fatal("Wait returned while the writes were held")
	}
	close(g.useGate)
	if err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if len(g.used) != keyUseWrites {
		t.Fatalf("%d uses written, want %d (the rest dropped while the slots were taken)", len(g.used), keyUseWrites)
	}
	// A dropped use is written by the key's next request.
	if _, err := a.Key(ctx, keys[len(keys)-1]); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if len(g.used) != keyUseWrites+1 {
		t.Fatalf("%d uses written after a dropped key's next request, want %d", len(g.used), keyUseWrites+1)
	}
}
