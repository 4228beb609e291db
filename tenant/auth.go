package tenant

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// Lookup is what an Authenticator reads: the part of Store that finds a
// tenant by key hash or by id.
type Lookup interface {
	// TenantByKeyHash finds the tenant owning a key (errdefs.ErrNotFound).
	TenantByKeyHash(ctx context.Context, keyHash string) (*Tenant, error)
	// GetTenant finds a tenant by id (errdefs.ErrNotFound).
	GetTenant(ctx context.Context, id string) (*Tenant, error)
}

// DefaultCacheTTL is AuthConfig.CacheTTL's default.
const DefaultCacheTTL = time.Second

// AuthConfig tunes an Authenticator. The zero value is ready to use.
type AuthConfig struct {
	// CacheTTL is how long a successful lookup (by key or by id) is
	// reused: the key lookup is a third of the HTTP layer's CPU on SQLite,
	// and a busy sandbox would otherwise cost a store read per call. A
	// rotated or deleted key, a deleted tenant or a changed guard mode
	// takes effect within this time. Zero: DefaultCacheTTL; negative: no
	// cache. Failures are never cached.
	CacheTTL time.Duration
	// Clock returns the time; nil: time.Now.
	Clock func() time.Time
}

// Authenticator resolves API keys and tenant ids to tenants for every edge
// (/v1, MCP, E2B), through one short-lived cache. It is safe for
// concurrent use.
type Authenticator struct {
	st    Lookup
	ttl   time.Duration
	clock func() time.Time
	keys  cache // by key hash
	ids   cache // by tenant id

	// usedMu guards used: when each key's use was last recorded
	// (Keys.KeyUsed), so a busy key costs one write per KeyUseInterval.
	usedMu sync.Mutex
	used   map[string]time.Time
	// writes bounds the key-use writes in flight. They run off the
	// request's path: a slow store delays no request, and a full set
	// drops the write (the key's next request tries again).
	writes chan struct{}
}

// keyUseWrites is how many key-use writes may be in flight at once, and
// keyUseTimeout how long one may take.
const (
	keyUseWrites  = 4
	keyUseTimeout = 10 * time.Second
)

// NewAuthenticator returns an Authenticator over st.
func NewAuthenticator(st Lookup, cfg AuthConfig) *Authenticator {
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Authenticator{st: st, ttl: cfg.CacheTTL, clock: cfg.Clock, writes: make(chan struct{}, keyUseWrites)}
}

// Key returns the tenant owning an API key. A missing, malformed or
// unknown key is errdefs.ErrUnauthenticated; a store failure is returned
// as it is.
func (a *Authenticator) Key(ctx context.Context, key string) (*Tenant, error) {
	if key == "" {
		return nil, fmt.Errorf("missing API key: %w", errdefs.ErrUnauthenticated)
	}
	if !ValidKey(key) {
		return nil, ErrBadKey
	}
	hash := HashKey(key)
	t, err := a.cached(ctx, &a.keys, hash, a.st.TenantByKeyHash)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, ErrBadKey
	}
	if err != nil {
		return nil, fmt.Errorf("look up API key: %w", err)
	}
	a.markUsed(ctx, hash)
	return t, nil
}

// Forget drops the key of keyHash from the cache, so that a revoked key
// is refused by the next request on this daemon rather than after
// CacheTTL. Another daemon on the same store refuses it within its own
// CacheTTL.
func (a *Authenticator) Forget(keyHash string) {
	a.keys.drop(keyHash)
}

// markUsed records the key's use in the store when it implements
// KeyUsed, at most once per KeyUseInterval per key. The write runs in the
// background with a context of its own (the request may end first). A
// failure, or a write dropped because keyUseWrites are already in flight,
// is not the request's: the next request of the key tries again.
func (a *Authenticator) markUsed(ctx context.Context, hash string) {
	ku, ok := a.st.(interface {
		KeyUsed(ctx context.Context, keyHash string, at time.Time) error
	})
	if !ok {
		return
	}
	now := a.clock()
	a.usedMu.Lock()
	last, seen := a.used[hash]
	if seen && now.Sub(last) < KeyUseInterval {
		a.usedMu.Unlock()
		return
	}
	if a.used == nil || len(a.used) >= maxCached {
		a.used = map[string]time.Time{}
	}
	a.used[hash] = now
	a.usedMu.Unlock()
	select {
	case a.writes <- struct{}{}:
	default:
		a.forgetUse(hash, now)
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyUseTimeout)
	go func() {
		defer func() { <-a.writes }()
		defer cancel()
		if err := ku.KeyUsed(wctx, hash, now); err != nil {
			a.forgetUse(hash, now)
		}
	}()
}

// Wait waits until the key-use writes in flight have ended, or ctx is
// done: a daemon's close calls it before its store closes, so no write
// races the close. It takes every write slot, then gives them back; a use
// marked meanwhile is dropped, and written by the key's next request.
func (a *Authenticator) Wait(ctx context.Context) error {
	taken := 0
	defer func() {
		for ; taken > 0; taken-- {
			<-a.writes
		}
	}()
	for taken < cap(a.writes) {
		select {
		case a.writes <- struct{}{}:
			taken++
		case <-ctx.Done():
			return fmt.Errorf("key-use writes in flight: %w", ctx.Err())
		}
	}
	return nil
}

// forgetUse drops the record that hash's use was written at at, unless a
// later use replaced it, so the next request writes it.
func (a *Authenticator) forgetUse(hash string, at time.Time) {
	a.usedMu.Lock()
	if t, ok := a.used[hash]; ok && t.Equal(at) {
		delete(a.used, hash)
	}
	a.usedMu.Unlock()
}

// Tenant returns the tenant of id (errdefs.ErrNotFound when there is none,
// as when it was deleted).
func (a *Authenticator) Tenant(ctx context.Context, id string) (*Tenant, error) {
	return a.cached(ctx, &a.ids, id, a.st.GetTenant)
}

func (a *Authenticator) cached(ctx context.Context, c *cache, k string, lookup func(context.Context, string) (*Tenant, error)) (*Tenant, error) {
	if a.ttl <= 0 {
		return lookup(ctx, k)
	}
	now := a.clock()
	t, epoch, ok := c.get(k, now)
	if ok {
		return t, nil
	}
	t, err := lookup(ctx, k)
	if err != nil {
		return nil, err
	}
	c.put(k, t, now.Add(a.ttl), epoch)
	return t, nil
}

// maxCached bounds each cache; when full it starts over.
const maxCached = 4096

// cache is a map of tenants with expiry times.
type cache struct {
	mu sync.Mutex
	m  map[string]cached
	// epoch counts drops: a lookup that began before a drop does not put
	// its (perhaps revoked) answer back.
	epoch uint64
}

type cached struct {
	t       *Tenant
	expires time.Time
}

func (c *cache) get(k string, now time.Time) (*Tenant, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.expires) {
		return nil, c.epoch, false
	}
	return e.t, c.epoch, true
}

func (c *cache) drop(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
	c.epoch++
}

func (c *cache) put(k string, t *Tenant, expires time.Time, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		return
	}
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[string]cached{}
	}
	c.m[k] = cached{t: t, expires: expires}
}
