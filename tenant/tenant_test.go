package tenant

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// lookup is a fake Lookup that counts its calls.
type lookup struct {
	mu     sync.Mutex
	byHash map[string]*Tenant
	byID   map[string]*Tenant
	calls  int
	fail   error
}

func (l *lookup) TenantByKeyHash(_ context.Context, h string) (*Tenant, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.fail != nil {
		return nil, l.fail
	}
	if t, ok := l.byHash[h]; ok {
		return t, nil
	}
	return nil, errdefs.ErrNotFound
}

func (l *lookup) GetTenant(_ context.Context, id string) (*Tenant, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.fail != nil {
		return nil, l.fail
	}
	if t, ok := l.byID[id]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
}

func (l *lookup) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestAuthenticatorKey(t *testing.T) {
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tn := &Tenant{ID: "t1", GuardMode: GuardReport}
	unknown, _ := NewKey()
	tests := []struct {
		name     string
		key      string
		fail     error
		wantID   string
		wantAuth bool // errdefs.ErrUnauthenticated
	}{
		{"valid", key, nil, "t1", false},
		{"missing", "", nil, "", true},
		{"malformed", "e2b_xyz", nil, "", true},
		{"unknown", unknown, nil, "", true},
		{"store down", key, errors.New("db locked"), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &lookup{byHash: map[string]*Tenant{HashKey(key): tn}, fail: tc.fail}
			got, err := NewAuthenticator(l, AuthConfig{}).Key(context.Background(), tc.key)
			if tc.wantID != "" {
				if err != nil || got.ID != tc.wantID {
					t.Fatalf("Key = %v, %v; want %s", got, err, tc.wantID)
				}
				return
			}
			if err == nil {
				t.Fatalf("Key = %v, want an error", got)
			}
			if errors.Is(err, errdefs.ErrUnauthenticated) != tc.wantAuth {
				t.Fatalf("error %v: unauthenticated %v, want %v", err, !tc.wantAuth, tc.wantAuth)
			}
		})
	}
}

// TestAuthenticatorCache: one store read per key and per id within the
// TTL, a fresh one after it, none cached on failure, none at all with a
// negative TTL.
func TestAuthenticatorCache(t *testing.T) {
	key, _ := NewKey()
	tn := &Tenant{ID: "t1"}
	ctx := context.Background()
	tests := []struct {
		name      string
		ttl       time.Duration
		advance   time.Duration
		wantReads int
	}{
		{"within the TTL", 0, 500 * time.Millisecond, 2}, // one by key, one by id
		{"after the TTL", 0, 1500 * time.Millisecond, 4}, // both read again
		{"no cache", -1, 0, 6},                           // every call reads
		{"longer TTL", time.Minute, 30 * time.Second, 2}, // reused
		{"longer TTL, lapsed", time.Minute, 2 * time.Minute, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &lookup{byHash: map[string]*Tenant{HashKey(key): tn}, byID: map[string]*Tenant{"t1": tn}}
			clk := &clock{now: time.Unix(1000, 0)}
			a := NewAuthenticator(l, AuthConfig{CacheTTL: tc.ttl, Clock: clk.Now})
			for _, step := range []time.Duration{0, 0, tc.advance} {
				clk.now = clk.now.Add(step)
				if _, err := a.Key(ctx, key); err != nil {
					t.Fatal(err)
				}
				if _, err := a.Tenant(ctx, "t1"); err != nil {
					t.Fatal(err)
				}
				if step == 0 && tc.ttl >= 0 && l.count() != 2 {
					t.Fatalf("%d store reads before any expiry, want 2", l.count())
				}
			}
			if got := l.count(); got != tc.wantReads {
				t.Errorf("%d store reads, want %d", got, tc.wantReads)
			}
		})
	}
	t.Run("failures are not cached", func(t *testing.T) {
		l := &lookup{byID: map[string]*Tenant{}}
		a := NewAuthenticator(l, AuthConfig{})
		for range 3 {
			if _, err := a.Tenant(ctx, "gone"); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("Tenant(gone) = %v, want not_found", err)
			}
		}
		if l.count() != 3 {
			t.Errorf("%d store reads, want 3", l.count())
		}
	})
}

// TestContextKey: one key carries both the scope (the id stores read) and
// the authenticated tenant (the guard reads); scoping a request again by
// its own id keeps the tenant, scoping it to another drops it.
func TestContextKey(t *testing.T) {
	ctx := context.Background()
	if _, ok := FromContext(ctx); ok {
		t.Fatal("empty context has a tenant id")
	}
	tn := &Tenant{ID: "t1", GuardMode: GuardOff}
	req := With(ctx, tn)
	if got, ok := From(req); !ok || got != tn {
		t.Fatalf("From = %v, %v", got, ok)
	}
	if id, ok := FromContext(req); !ok || id != "t1" {
		t.Fatalf("FromContext = %q, %v", id, ok)
	}
	same := WithID(req, "t1")
	if got, ok := From(same); !ok || got != tn {
		t.Fatalf("WithID(same id) lost the tenant: %v, %v", got, ok)
	}
	other := WithID(req, "t2")
	if _, ok := From(other); ok {
		t.Fatal("WithID(another id) kept the first tenant")
	}
	if id, _ := FromContext(other); id != "t2" {
		t.Fatalf("FromContext = %q, want t2", id)
	}
	if _, ok := From(WithID(ctx, "t3")); ok {
		t.Fatal("a context scoped by id only has an authenticated tenant")
	}
}
