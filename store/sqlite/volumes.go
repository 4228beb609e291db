package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/volumes"
)

var _ volumes.Store = (*Store)(nil)

// volumeLive is the condition on volume_mounts m of a mount whose context
// is not yet terminated.
const volumeLive = `EXISTS (SELECT 1 FROM execution_contexts c WHERE c.id = m.context_id AND c.state IN ('creating', 'ready'))`

// CreateVolume implements volumes.Store.
func (s *Store) CreateVolume(ctx context.Context, v volumes.Volume) (volumes.Volume, error) {
	if err := rules.PrepareVolume(ctx, &v, time.Now()); err != nil {
		return volumes.Volume{}, err
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO volumes (id, tenant_id, name, size_bytes, created_at) VALUES (?, ?, ?, ?, ?)`,
		v.ID, v.TenantID, v.Name, v.SizeBytes, ms(v.CreatedAt))
	if err != nil {
		var e *sqlite.Error
		if errors.As(err, &e) {
			switch e.Code() {
			case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
				return volumes.Volume{}, fmt.Errorf("tenant %s: %w", v.TenantID, errdefs.ErrNotFound)
			case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
				return volumes.Volume{}, fmt.Errorf("volume %q: %w", v.Name, errdefs.ErrAlreadyExists)
			}
		}
		return volumes.Volume{}, fmt.Errorf("create volume %s: %w", v.Name, err)
	}
	v.CreatedAt = fromMs(ms(v.CreatedAt))
	return v, nil
}

func (s *Store) queryVolumes(ctx context.Context, where string, args ...any) ([]volumes.Volume, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, tenant_id, name, size_bytes, created_at FROM volumes WHERE `+where+` ORDER BY tenant_id, name`, args...)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	defer rows.Close()
	var out []volumes.Volume
	for rows.Next() {
		var v volumes.Volume
		var created int64
		if err := rows.Scan(&v.ID, &v.TenantID, &v.Name, &v.SizeBytes, &created); err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		v.CreatedAt = fromMs(created)
		out = append(out, v)
	}
	return out, rows.Err()
}

// GetVolume implements volumes.Store.
func (s *Store) GetVolume(ctx context.Context, tenantID, ref string) (volumes.Volume, error) {
	if !rules.Visible(ctx, tenantID) || tenantID == "" {
		return volumes.Volume{}, volumes.NotFound(ref)
	}
	rows, err := s.queryVolumes(ctx, `tenant_id = ? AND (name = ? OR id = ?)`, tenantID, ref, ref)
	if err != nil {
		return volumes.Volume{}, err
	}
	return rules.PickVolume(rows, ref)
}

// ListVolumes implements volumes.Store.
func (s *Store) ListVolumes(ctx context.Context, tenantID string) ([]volumes.Volume, error) {
	if err := rules.CheckVolumeList(ctx, tenantID); err != nil {
		return nil, err
	}
	if tenantID == "" {
		return s.queryVolumes(ctx, `1 = 1`)
	}
	if !rules.Visible(ctx, tenantID) {
		return nil, nil
	}
	return s.queryVolumes(ctx, `tenant_id = ?`, tenantID)
}

// AttachVolume implements volumes.Store.
func (s *Store) AttachVolume(ctx context.Context, tenantID, contextID string, m volumes.Mount) error {
	id := m.VolumeID
	if !rules.Visible(ctx, tenantID) || tenantID == "" {
		return volumes.NotFound(id)
	}
	ro := 0
	if m.ReadOnly {
		ro = 1
	}
	res, err := s.w.ExecContext(ctx, `INSERT OR IGNORE INTO volume_mounts (volume_id, context_id, tenant_id, path, read_only) SELECT id, ?, tenant_id, ?, ? FROM volumes WHERE id = ? AND tenant_id = ?`,
		contextID, m.Path, ro, id, tenantID)
	if err != nil {
		return fmt.Errorf("attach volume %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		_, err := s.GetVolume(ctx, tenantID, id) // attached already, or missing
		return err
	}
	return nil
}

// VolumeUsers implements volumes.Store.
func (s *Store) VolumeUsers(ctx context.Context, tenantID, id string) ([]string, error) {
	v, err := s.GetVolume(ctx, tenantID, id)
	if err != nil || v.ID != id {
		return nil, volumes.NotFound(id)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT m.context_id FROM volume_mounts m WHERE m.volume_id = ? AND m.tenant_id = ? AND `+volumeLive+` ORDER BY 1`, id, tenantID)
	if err != nil {
		return nil, fmt.Errorf("volume %s users: %w", id, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeleteVolume implements volumes.Store.
func (s *Store) DeleteVolume(ctx context.Context, tenantID, id string) error {
	if !rules.Visible(ctx, tenantID) || tenantID == "" {
		return volumes.NotFound(id)
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM volumes WHERE id = ?1 AND tenant_id = ?2 AND NOT EXISTS (SELECT 1 FROM volume_mounts m WHERE m.volume_id = ?1 AND `+volumeLive+`)`, id, tenantID)
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	if _, err := s.VolumeUsers(ctx, tenantID, id); err != nil {
		return err
	}
	return volumes.InUse(id)
}

// ContextVolumes implements volumes.Store.
func (s *Store) ContextVolumes(ctx context.Context, tenantID, contextID string) ([]volumes.Mount, error) {
	if !rules.Visible(ctx, tenantID) || tenantID == "" {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT volume_id, path, read_only FROM volume_mounts WHERE context_id = ? AND tenant_id = ? ORDER BY path`, contextID, tenantID)
	if err != nil {
		return nil, fmt.Errorf("volumes of context %s: %w", contextID, err)
	}
	defer rows.Close()
	var out []volumes.Mount
	for rows.Next() {
		var m volumes.Mount
		if err := rows.Scan(&m.VolumeID, &m.Path, &m.ReadOnly); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
