package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/templates"
)

var _ templates.SnapshotStore = (*Store)(nil)

// CreateSnapshot implements templates.SnapshotStore: the row is written
// only if its template is its tenant's.
func (s *Store) CreateSnapshot(ctx context.Context, sn templates.Snapshot) error {
	if err := rules.PrepareSnapshot(ctx, &sn, time.Now()); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO snapshots (id, tenant_id, context_id, template, bytes, created_at)
		SELECT id, tenant_id, ?, ?, ?, ? FROM templates WHERE id = ? AND tenant_id = ?`,
		sn.ContextID, sn.Template, sn.Bytes, ms(sn.CreatedAt), sn.ID, sn.TenantID)
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
	rows, err := s.r.QueryContext(ctx, `SELECT id, tenant_id, context_id, template, bytes, created_at FROM snapshots
		WHERE tenant_id = ? AND (? = '' OR context_id = ?) ORDER BY created_at DESC, id`, tenantID, contextID, contextID)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	defer rows.Close()
	var out []templates.Snapshot
	for rows.Next() {
		var sn templates.Snapshot
		var created int64
		if err := rows.Scan(&sn.ID, &sn.TenantID, &sn.ContextID, &sn.Template, &sn.Bytes, &created); err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		sn.CreatedAt = fromMs(created)
		out = append(out, sn)
	}
	return out, rows.Err()
}
