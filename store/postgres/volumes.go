package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/volumes"
)

var _ volumes.Store = (*Store)(nil)

// volumeLive is the condition on volume_mounts m of a mount whose context
// is not yet terminated.
const volumeLive = `EXISTS (SELECT 1 FROM execution_contexts c WHERE c.id = m.context_id AND c.state IN ('creating', 'ready'))`

// volumeScope runs a tenant's volume statements as that tenant
// (row-level security), also when the caller did not scope ctx.
func volumeScope(ctx context.Context, tenantID string) context.Context {
	if _, ok := tenant.FromContext(ctx); ok || tenantID == "" {
		return ctx
	}
	return tenant.WithID(ctx, tenantID)
}

// CreateVolume implements volumes.Store.
func (s *Store) CreateVolume(ctx context.Context, v volumes.Volume) (volumes.Volume, error) {
	if err := rules.PrepareVolume(ctx, &v, time.Now()); err != nil {
		return volumes.Volume{}, err
	}
	v.CreatedAt = rules.Time(v.CreatedAt)
	err := s.run(volumeScope(ctx, v.TenantID), func(q querier) error {
		_, err := q.Exec(ctx, `INSERT INTO volumes (id, tenant_id, name, size_bytes, created_at) VALUES ($1, $2, $3, $4, $5)`,
			v.ID, v.TenantID, v.Name, v.SizeBytes, v.CreatedAt)
		return err
	})
	if err != nil {
		switch pgCode(err) {
		case "23503":
			return volumes.Volume{}, fmt.Errorf("tenant %s: %w", v.TenantID, errdefs.ErrNotFound)
		case "23505":
			return volumes.Volume{}, fmt.Errorf("volume %q: %w", v.Name, errdefs.ErrAlreadyExists)
		}
		return volumes.Volume{}, mapErr(err, "create volume "+v.Name)
	}
	return v, nil
}

func (s *Store) queryVolumes(ctx context.Context, where string, args ...any) ([]volumes.Volume, error) {
	var out []volumes.Volume
	err := s.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT id, tenant_id, name, size_bytes, created_at FROM volumes WHERE `+where+` ORDER BY tenant_id, name`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v volumes.Volume
			if err := rows.Scan(&v.ID, &v.TenantID, &v.Name, &v.SizeBytes, &v.CreatedAt); err != nil {
				return err
			}
			v.CreatedAt = rules.Time(v.CreatedAt)
			out = append(out, v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapErr(err, "list volumes")
	}
	return out, nil
}

// GetVolume implements volumes.Store.
func (s *Store) GetVolume(ctx context.Context, tenantID, ref string) (volumes.Volume, error) {
	if !rules.Visible(ctx, tenantID) || tenantID == "" {
		return volumes.Volume{}, volumes.NotFound(ref)
	}
	rows, err := s.queryVolumes(volumeScope(ctx, tenantID), `tenant_id = $1 AND (name = $2 OR id = $2)`, tenantID, ref)
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
		return s.queryVolumes(ctx, `true`)
	}
	if !rules.Visible(ctx, tenantID) {
		return nil, nil
	}
	return s.queryVolumes(volumeScope(ctx, tenantID), `tenant_id = $1`, tenantID)
}

// AttachVolume implements volumes.Store.
func (s *Store) AttachVolume(ctx context.Context, tenantID, contextID string, m volumes.Mount) error {
	id := m.VolumeID
	if !rules.Visible(ctx, tenantID) || tenantID == "" {
		return volumes.NotFound(id)
	}
	var n int64
	err := s.run(volumeScope(ctx, tenantID), func(q querier) error {
		tag, err := q.Exec(ctx, `INSERT INTO volume_mounts (volume_id, context_id, tenant_id, path, read_only) SELECT id, $1, tenant_id, $4, $5 FROM volumes WHERE id = $2 AND tenant_id = $3 ON CONFLICT DO NOTHING`,
			contextID, id, tenantID, m.Path, m.ReadOnly)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "attach volume "+id)
	}
	if n == 0 {
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
	var out []string
	err = s.run(volumeScope(ctx, tenantID), func(q querier) error {
		rows, err := q.Query(ctx, `SELECT m.context_id FROM volume_mounts m WHERE m.volume_id = $1 AND m.tenant_id = $2 AND `+volumeLive+` ORDER BY 1`, id, tenantID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapErr(err, "volume users "+id)
	}
	return out, nil
}

// DeleteVolume implements volumes.Store.
func (s *Store) DeleteVolume(ctx context.Context, tenantID, id string) error {
	if !rules.Visible(ctx, tenantID) || tenantID == "" {
		return volumes.NotFound(id)
	}
	var n int64
	err := s.run(volumeScope(ctx, tenantID), func(q querier) error {
		tag, err := q.Exec(ctx, `DELETE FROM volumes WHERE id = $1 AND tenant_id = $2 AND NOT EXISTS (SELECT 1 FROM volume_mounts m WHERE m.volume_id = $1 AND `+volumeLive+`)`, id, tenantID)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "delete volume "+id)
	}
	if n > 0 {
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
	var out []volumes.Mount
	err := s.run(volumeScope(ctx, tenantID), func(q querier) error {
		rows, err := q.Query(ctx, `SELECT volume_id, path, read_only FROM volume_mounts WHERE context_id::text = $1 AND tenant_id = $2 ORDER BY path`, contextID, tenantID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m volumes.Mount
			if err := rows.Scan(&m.VolumeID, &m.Path, &m.ReadOnly); err != nil {
				return err
			}
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapErr(err, "volumes of context "+contextID)
	}
	return out, nil
}
