package secret

import (
	"context"
	"time"
)

// Stored is a tenant's secret as a store keeps it: a name the tenant
// chose, the Secret (its ID makes the placeholder; Hosts; Value), and
// the environment variable that carries the placeholder in sandboxes
// ("" for none). It never prints its value (String is the Secret's).
type Stored struct {
	Name string
	Secret
	Env       string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Store keeps tenants' secrets (store/memory, store/sqlite,
// store/postgres; with row-level security on postgres). Names follow
// policy.CheckSecretName.
type Store interface {
	// PutSecret creates or replaces tenant's secret s.Name. A replaced
	// secret keeps its ID (so its placeholder, already in sandboxes).
	PutSecret(ctx context.Context, tenantID string, s Stored) (Stored, error)
	// GetSecrets returns the named secrets of tenant with their values,
	// in the order asked; nil names: all of them. A name without a
	// secret is errdefs.ErrNotFound.
	GetSecrets(ctx context.Context, tenantID string, names []string) ([]Stored, error)
	// ListSecrets returns tenant's secrets by name, without values.
	ListSecrets(ctx context.Context, tenantID string) ([]Stored, error)
	// DeleteSecret removes one (errdefs.ErrNotFound if there is none).
	DeleteSecret(ctx context.Context, tenantID, name string) error
}
