package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/templates"
)

var _ templates.SnapshotStore = (*Store)(nil)

// CreateSnapshot implements templates.SnapshotStore: the row is written
// only if its template is its tenant's, as that tenant (row-level
// security).
func (s *Store) CreateSnapshot(ctx context.Context, sn templates.Snapshot) error {
	if err := rules.PrepareSnapshot(ctx, &sn, time.Now()); err != nil {
		return err
	}
	var n int64
	err := s.run(templateScope(ctx, sn.TenantID), func(q querier) error {
		tag, err := q.Exec(ctx, `INSERT INTO snapshots (id, tenant_id, context_id, template, bytes, created_at, fork)
			SELECT id, tenant_id, $1, $2, $3, $4, $7 FROM templates WHERE id = $5 AND tenant_id = $6`,
			sn.ContextID, sn.Template, sn.Bytes, sn.CreatedAt, sn.ID, sn.TenantID, sn.Fork)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "create snapshot "+sn.ID)
	}
	if n == 0 {
		return rules.SnapshotTemplateMissing(sn)
	}
	return nil
}

// ListSnapshots implements templates.SnapshotStore.
func (s *Store) ListSnapshots(ctx context.Context, tenantID, contextID string) ([]templates.Snapshot, error) {
	if !rules.Visible(ctx, tenantID) {
		return nil, nil
	}
	var out []templates.Snapshot
	err := s.run(templateScope(ctx, tenantID), func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+snapshotCols+` FROM snapshots
			WHERE tenant_id = $1 AND ($2 = '' OR context_id = $2) ORDER BY created_at DESC, id`, tenantID, contextID)
		if err != nil {
			return err
		}
		out, err = scanSnapshots(rows)
		return err
	})
	if err != nil {
		return nil, mapErr(err, "list snapshots")
	}
	return out, nil
}

// ForkSnapshots implements templates.SnapshotStore: the system's ctx reads
// every tenant's marked rows; a tenant's, under row-level security, its
// own only.
func (s *Store) ForkSnapshots(ctx context.Context, before time.Time, limit int) ([]templates.Snapshot, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	var out []templates.Snapshot
	err := s.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+snapshotCols+` FROM snapshots
			WHERE fork AND created_at < $1 ORDER BY created_at, id LIMIT $2`, before, lim)
		if err != nil {
			return err
		}
		out, err = scanSnapshots(rows)
		return err
	})
	if err != nil {
		return nil, mapErr(err, "list fork snapshots")
	}
	return out, nil
}

const snapshotCols = `id, tenant_id, context_id, template, bytes, created_at, fork`

func scanSnapshots(rows pgx.Rows) ([]templates.Snapshot, error) {
	defer rows.Close()
	var out []templates.Snapshot
	for rows.Next() {
		var sn templates.Snapshot
		if err := rows.Scan(&sn.ID, &sn.TenantID, &sn.ContextID, &sn.Template, &sn.Bytes, &sn.CreatedAt, &sn.Fork); err != nil {
			return nil, err
		}
		sn.CreatedAt = rules.Time(sn.CreatedAt)
		out = append(out, sn)
	}
	return out, rows.Err()
}
