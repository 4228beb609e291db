package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/tenant"
)

type tenantKey struct{}

// TenantFromContext returns the tenant a request authenticated as. Handlers
// mounted behind the server's auth (MCP) use it; stores use the plain id
// from tenant.FromContext.
func TenantFromContext(ctx context.Context) (*tenant.Tenant, bool) {
	t, ok := ctx.Value(tenantKey{}).(*tenant.Tenant)
	return t, ok
}

// APIKey returns the key a request carries: "Authorization: Bearer <key>"
// or "X-API-KEY: <key>".
func APIKey(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if k, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(k)
		}
	}
	return strings.TrimSpace(r.Header.Get(api.HeaderAPIKey))
}

// Authenticate resolves the tenant of a request's API key. It fails with
// errdefs.ErrUnauthenticated for a missing, malformed or unknown key.
func (s *Server) Authenticate(r *http.Request) (*tenant.Tenant, error) {
	key := APIKey(r)
	if key == "" {
		return nil, fmt.Errorf("missing API key (Authorization: Bearer or X-API-KEY): %w", errdefs.ErrUnauthenticated)
	}
	if !tenant.ValidKey(key) {
		return nil, tenant.ErrBadKey
	}
	hash := tenant.HashKey(key)
	if t, ok := s.keys.get(hash); ok {
		return t, nil
	}
	t, err := s.cfg.Tenants.TenantByKeyHash(r.Context(), hash)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, tenant.ErrBadKey
	}
	if err != nil {
		return nil, fmt.Errorf("look up API key: %w", err)
	}
	s.keys.put(hash, t)
	return t, nil
}

// keyCache remembers successful key lookups for a short TTL: the lookup
// is a third of the HTTP layer's CPU on SQLite. A rotated or deleted key
// keeps working for at most the TTL. Failures are never cached.
type keyCache struct {
	ttl time.Duration // <= 0: disabled

	mu sync.Mutex
	m  map[string]keyEntry
}

type keyEntry struct {
	t       *tenant.Tenant
	expires time.Time
}

// maxCachedKeys bounds the cache; when full it starts over.
const maxCachedKeys = 4096

func (c *keyCache) get(hash string) (*tenant.Tenant, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	if !ok || time.Now().After(e.expires) {
		return nil, false
	}
	return e.t, true
}

func (c *keyCache) put(hash string, t *tenant.Tenant) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedKeys {
		c.m = map[string]keyEntry{}
	}
	c.m[hash] = keyEntry{t: t, expires: time.Now().Add(c.ttl)}
}

// requireKey authenticates, admits the request under the tenant's
// in-flight limit, then scopes the request context to the tenant
// (tenant.WithID, which the Postgres store turns into its RLS setting).
func (s *Server) requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := s.Authenticate(r)
		if err != nil {
			if errors.Is(err, errdefs.ErrUnauthenticated) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sandlot"`)
			}
			s.writeError(w, r, err)
			return
		}
		if lw, ok := r.Context().Value(logKey{}).(*logWriter); ok {
			lw.tenant = t.ID
		}
		release, err := s.cfg.Admission.Tenant(r.Context(), t.ID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer release()
		ctx := context.WithValue(tenant.WithID(r.Context(), t.ID), tenantKey{}, t)
		if mode := r.Header.Get(api.HeaderGuardMode); mode != "" {
			if err := guardOverride(t, mode); err != nil {
				s.writeError(w, r, err)
				return
			}
			ctx = guard.WithMode(ctx, mode)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// guardOverride checks a per-request guard mode: a tenant admin's right
// only (403 for anyone else, so a leaked ordinary key cannot switch the
// guard off), and one of the three modes (400).
func guardOverride(t *tenant.Tenant, mode string) error {
	if !t.Admin {
		return fmt.Errorf("%s is for admin tenants only: %w", api.HeaderGuardMode, errdefs.ErrPermissionDenied)
	}
	switch mode {
	case tenant.GuardOff, tenant.GuardReport, tenant.GuardEnforce:
		return nil
	}
	return invalid("%s must be off, report or enforce, not %q", api.HeaderGuardMode, mode)
}

// mustTenant returns the authenticated tenant; routes behind requireKey
// always have one.
func mustTenant(r *http.Request) *tenant.Tenant {
	t, ok := TenantFromContext(r.Context())
	if !ok {
		panic("server: route without requireKey")
	}
	return t
}
