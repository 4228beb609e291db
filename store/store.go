// Package store opens the persistence backend named by a URL. The
// implementations live in store/memory, store/sqlite and store/postgres and
// all pass one conformance suite, store/storetest; docs/stores.md records the
// schema, the row-level-security design and the migration rules.
//
// Semantics shared by every backend, beyond the doc comments of
// contexts.Store and tenant.Store:
//   - Times are stored at millisecond precision in UTC; records come back
//     that way.
//   - When ctx carries a tenant (tenant.FromContext), context and audit
//     statements only see that tenant's rows: other tenants' records are
//     ErrNotFound, and writing a row of another tenant is
//     ErrPermissionDenied. Tenant and key methods are system tables and are
//     not scoped.
//   - RecordExecution and Touch apply to active records only
//     (ErrFailedPrecondition otherwise).
package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/sqlite"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/volumes"
)

// AuditEvent is one entry of the audit trail.
type AuditEvent = audit.Event

// Backend is what the daemon needs from a store: contexts, tenants, their
// secrets and templates, and the audit trail.
type Backend interface {
	contexts.Store
	tenant.Store
	tenant.Keys
	secret.Store
	templates.Store
	volumes.Store
	templates.SnapshotStore
	// AppendAudit adds ev to the trail (ID assigned by the store, At
	// defaults to now).
	AppendAudit(ctx context.Context, ev AuditEvent) error
	// AppendAuditBatch adds evs to the trail in order, all or none, in one
	// write (audit.Writer's batches).
	AppendAuditBatch(ctx context.Context, evs []AuditEvent) error
	// ListAudit returns the newest events first, of one tenant or of all
	// when tenantID is empty; limit <= 0 means 100.
	ListAudit(ctx context.Context, tenantID string, limit int) ([]AuditEvent, error)
	// ListAuditKind is ListAudit of the events of one kind ("" any): the
	// newest limit events of that kind, not those among the newest limit.
	ListAuditKind(ctx context.Context, tenantID, kind string, limit int) ([]AuditEvent, error)
	// PruneAudit removes at most limit events (<= 0: 10000) whose At is
	// before before and returns how many it removed: the retention sweep
	// (contexts.AuditPruner), system work refused to a tenant-scoped ctx.
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)
}

var (
	_ Backend = (*memory.Store)(nil)
	_ Backend = (*sqlite.Store)(nil)
	_ Backend = (*postgres.Store)(nil)
)

// Open returns the backend named by url:
//
//	memory:                       in-process, lost on exit
//	sqlite:///abs/path/sandlot.db SQLite (also sqlite:relative.db or a bare file path)
//	postgres://... postgresql://  Postgres
func Open(ctx context.Context, url string) (Backend, error) {
	return OpenWith(ctx, url, Options{})
}

// Options are what every backend is opened with.
type Options struct {
	// SecretsKey encrypts tenants' secrets at rest (32 bytes; SQLite and
	// Postgres). nil: secrets are neither stored nor read.
	SecretsKey []byte
}

// OpenWith is Open with opts.
func OpenWith(ctx context.Context, url string, opts Options) (Backend, error) {
	switch {
	case url == "memory:" || url == "memory":
		return memory.New(), nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return postgres.Open(ctx, url, postgres.Config{SecretsKey: opts.SecretsKey})
	case url == "":
		return nil, fmt.Errorf("store: empty url: %w", errdefs.ErrInvalidArgument)
	default:
		return sqlite.Open(ctx, SQLitePath(url), sqlite.Config{SecretsKey: opts.SecretsKey})
	}
}
