package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/tenant"
)

// Authenticator resolves an API key to its tenant; *tenant.Authenticator
// implements it, with the key cache every edge shares. A missing,
// malformed or unknown key is errdefs.ErrUnauthenticated.
type Authenticator interface {
	Key(ctx context.Context, key string) (*tenant.Tenant, error)
}

var _ Authenticator = (*tenant.Authenticator)(nil)

// APIKey returns the key a request carries: "Authorization: Bearer <key>"
// or "X-API-KEY: <key>".
func APIKey(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if k, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(k)
		}
	}
	if k := strings.TrimSpace(r.Header.Get(api.HeaderAPIKey)); k != "" {
		return k
	}
	return wsKey(r) // a browser's WebSocket (shellws.go)
}

// authenticate resolves the tenant of a request's API key.
func (s *Server) authenticate(r *http.Request) (*tenant.Tenant, error) {
	key := APIKey(r)
	if key == "" {
		return nil, fmt.Errorf("missing API key (Authorization: Bearer or X-API-KEY): %w", errdefs.ErrUnauthenticated)
	}
	return s.cfg.Auth.Key(r.Context(), key)
}

// RequireKey authenticates, admits the request under the tenant's
// in-flight limit (Config.Admit), then puts the tenant in the request
// context (tenant.With: the Postgres store turns it into its RLS setting,
// the guard reads the tenant's mode from it) and applies a tenant admin's
// guard-mode header. Every authenticated /v1 route is behind it, and the
// front door mounts MCP behind it too.
func (s *Server) RequireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := s.authenticate(r)
		if err != nil {
			if errors.Is(err, errdefs.ErrUnauthenticated) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sandlot"`)
			}
			s.writeError(w, r, err)
			return
		}
		if s.cfg.Admit != nil {
			release, err := s.cfg.Admit(r.Context(), t.ID)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			defer release()
		}
		ctx := tenant.With(r.Context(), t)
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

// mustTenant returns the authenticated tenant; routes behind RequireKey
// always have one.
func mustTenant(r *http.Request) *tenant.Tenant {
	t, ok := tenant.From(r.Context())
	if !ok {
		panic("server: route without RequireKey")
	}
	return t
}
