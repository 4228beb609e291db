package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

var _ templates.Store = (*Store)(nil)

const templateCols = `id, COALESCE(tenant_id, ''), name, image, source, settings, created_at`

// templateScope runs template statements of a tenant as that tenant
// (row-level security), also when the caller did not scope ctx; public
// templates ("") are the operator's and run unscoped unless ctx is.
func templateScope(ctx context.Context, tenantID string) context.Context {
	if _, ok := tenant.FromContext(ctx); ok || tenantID == "" {
		return ctx
	}
	return tenant.WithID(ctx, tenantID)
}

func nullTenant(id string) any {
	if id == "" {
		return nil
	}
	return id
}

// CreateTemplate implements templates.Store.
func (s *Store) CreateTemplate(ctx context.Context, t templates.Template) (templates.Template, error) {
	if err := rules.PrepareTemplate(ctx, &t, time.Now()); err != nil {
		return templates.Template{}, err
	}
	settings, err := json.Marshal(t.Settings)
	if err != nil {
		return templates.Template{}, err
	}
	err = s.run(templateScope(ctx, t.TenantID), func(q querier) error {
		_, err := q.Exec(ctx, `INSERT INTO templates (id, tenant_id, name, image, source, settings, created_at) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)`,
			t.ID, nullTenant(t.TenantID), t.Name, t.Image, t.Source, string(settings), t.CreatedAt)
		return err
	})
	if err != nil {
		if pgCode(err) == "23503" {
			return templates.Template{}, fmt.Errorf("tenant %s: %w", t.TenantID, errdefs.ErrNotFound)
		}
		return templates.Template{}, mapErr(err, "create template "+t.Name)
	}
	return t, nil
}

func (s *Store) queryTemplates(ctx context.Context, where string, args ...any) ([]templates.Template, error) {
	var out []templates.Template
	err := s.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+templateCols+` FROM templates WHERE `+where+` ORDER BY name, COALESCE(tenant_id, '')`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t templates.Template
			var settings []byte
			if err := rows.Scan(&t.ID, &t.TenantID, &t.Name, &t.Image, &t.Source, &settings, &t.CreatedAt); err != nil {
				return err
			}
			if err := json.Unmarshal(settings, &t.Settings); err != nil {
				return fmt.Errorf("template %s: settings: %w", t.ID, err)
			}
			t.CreatedAt = rules.Time(t.CreatedAt)
			out = append(out, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapErr(err, "list templates")
	}
	return out, nil
}

// GetTemplate implements templates.Store.
func (s *Store) GetTemplate(ctx context.Context, tenantID, ref string) (templates.Template, error) {
	rows, err := s.queryTemplates(templateScope(ctx, tenantID), `(tenant_id IS NULL OR tenant_id = $1) AND (name = $2 OR id = $2)`, tenantID, ref)
	if err != nil {
		return templates.Template{}, err
	}
	return rules.PickTemplate(rows, tenantID, ref)
}

// TemplateByID implements templates.Store.
func (s *Store) TemplateByID(ctx context.Context, id string) (templates.Template, error) {
	rows, err := s.queryTemplates(ctx, `id = $1`, id)
	if err != nil {
		return templates.Template{}, err
	}
	if len(rows) == 0 {
		return templates.Template{}, rules.TemplateNotFound(id)
	}
	return rows[0], nil
}

// ListTemplates implements templates.Store.
func (s *Store) ListTemplates(ctx context.Context, tenantID string, all bool) ([]templates.Template, error) {
	if err := rules.CheckAll(ctx, all); err != nil {
		return nil, err
	}
	if all {
		return s.queryTemplates(ctx, `true`)
	}
	return s.queryTemplates(templateScope(ctx, tenantID), `(tenant_id IS NULL OR tenant_id = $1)`, tenantID)
}

// DeleteTemplate implements templates.Store.
func (s *Store) DeleteTemplate(ctx context.Context, tenantID, id string) error {
	var n int64
	err := s.run(templateScope(ctx, tenantID), func(q querier) error {
		tag, err := q.Exec(ctx, `DELETE FROM templates WHERE id = $1 AND COALESCE(tenant_id, '') = $2`, id, tenantID)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "delete template "+id)
	}
	if n == 0 {
		return rules.TemplateNotFound(id)
	}
	return nil
}
