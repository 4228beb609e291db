package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

var _ templates.SnapshotStore = (*Store)(nil)

// CreateSnapshot implements templates.SnapshotStore: the row is written
// only if its template is its tenant's.
func (s *Store) CreateSnapshot(ctx context.Context, sn templates.Snapshot) error {
	if err := rules.PrepareSnapshot(ctx, &sn, time.Now()); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO snapshots (id, tenant_id, context_id, template, bytes, created_at, fork)
		SELECT id, tenant_id, ?, ?, ?, ?, ? FROM templates WHERE id = ? AND tenant_id = ?`,
		sn.ContextID, sn.Template, sn.Bytes, ms(sn.CreatedAt), sn.Fork, sn.ID, sn.TenantID)
	if err != nil {
		return fmt.Errorf("create snapshot %s: %w", sn.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return rules.SnapshotTemplateMissing(sn)
	}
	return nil
}

// ListSnapshots implements templates.SnapshotStore.
func (s *Store) ListSnapshots(ctx context.Context, tenantID, contextID string) ([]templates.Snapshot, error) {
	if !rules.Visible(ctx, tenantID) {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+snapshotCols+` FROM snapshots
		WHERE tenant_id = ? AND (? = '' OR context_id = ?) ORDER BY created_at DESC, id`, tenantID, contextID, contextID)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return scanSnapshots(rows)
}

// ForkSnapshots implements templates.SnapshotStore.
func (s *Store) ForkSnapshots(ctx context.Context, before time.Time, limit int) ([]templates.Snapshot, error) {
	only, _ := tenant.FromContext(ctx) // "": the system's, every tenant's
	rows, err := s.r.QueryContext(ctx, `SELECT `+snapshotCols+` FROM snapshots
		WHERE fork = 1 AND created_at < ? AND (? = '' OR tenant_id = ?) ORDER BY created_at, id LIMIT ?`,
		ms(before), only, only, limitOrAll(limit))
	if err != nil {
		return nil, fmt.Errorf("list fork snapshots: %w", err)
	}
	return scanSnapshots(rows)
}

const snapshotCols = `id, tenant_id, context_id, template, bytes, created_at, fork`

func scanSnapshots(rows *sql.Rows) ([]templates.Snapshot, error) {
	defer rows.Close()
	var out []templates.Snapshot
	for rows.Next() {
		var sn templates.Snapshot
		var created int64
		if err := rows.Scan(&sn.ID, &sn.TenantID, &sn.ContextID, &sn.Template, &sn.Bytes, &created, &sn.Fork); err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		sn.CreatedAt = fromMs(created)
		out = append(out, sn)
	}
	return out, rows.Err()
}

// limitOrAll is SQLite's LIMIT for limit: -1 (no limit) when it is not
// positive.
func limitOrAll(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}
