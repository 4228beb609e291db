package e2bcompattest

import (
	"context"
	"fmt"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// Tenants is a fake e2bcompat.Tenants: it maps API keys to tenant ids.
// Every tenant it names is live, at key generation 0, so access tokens are
// checked for signature and expiry only; tests of revocation use a
// tenant.Authenticator over a real store.
type Tenants map[string]string

var _ e2bcompat.Tenants = Tenants(nil)

// Key implements e2bcompat.Tenants.
func (k Tenants) Key(_ context.Context, key string) (*tenant.Tenant, error) {
	if id, ok := k[key]; ok {
		return &tenant.Tenant{ID: id, GuardMode: tenant.GuardEnforce}, nil
	}
	return nil, fmt.Errorf("unknown key: %w", errdefs.ErrUnauthenticated)
}

// Tenant implements e2bcompat.Tenants.
func (k Tenants) Tenant(_ context.Context, id string) (*tenant.Tenant, error) {
	for _, v := range k {
		if v == id {
			return &tenant.Tenant{ID: id, GuardMode: tenant.GuardEnforce}, nil
		}
	}
	return nil, fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
}
