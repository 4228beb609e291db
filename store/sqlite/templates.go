package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/templates"
)

var _ templates.Store = (*Store)(nil)

const templateCols = `id, COALESCE(tenant_id, ''), name, image, source, settings, created_at`

// templateScopeCond lets a scoped statement (?1 the tenant) read its own
// templates and the public ones.
const templateScopeCond = ` AND (?1 = '' OR tenant_id IS NULL OR tenant_id = ?1)`

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
	_, err = s.w.ExecContext(ctx, `INSERT INTO templates (id, tenant_id, name, image, source, settings, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		t.ID, nullTenant(t.TenantID), t.Name, t.Image, t.Source, string(settings), ms(t.CreatedAt))
	if err != nil {
		var e *sqlite.Error
		if errors.As(err, &e) {
			switch e.Code() {
			case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
				return templates.Template{}, fmt.Errorf("tenant %s: %w", t.TenantID, errdefs.ErrNotFound)
			case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
				return templates.Template{}, fmt.Errorf("template %q: %w", t.Name, errdefs.ErrAlreadyExists)
			}
		}
		return templates.Template{}, fmt.Errorf("create template %s: %w", t.Name, err)
	}
	return t, nil
}

func (s *Store) queryTemplates(ctx context.Context, where string, args ...any) ([]templates.Template, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+templateCols+` FROM templates WHERE `+where+templateScopeCond+` ORDER BY name, COALESCE(tenant_id, '')`,
		append([]any{scope(ctx)}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	defer rows.Close()
	var out []templates.Template
	for rows.Next() {
		var t templates.Template
		var settings string
		var created int64
		if err := rows.Scan(&t.ID, &t.TenantID, &t.Name, &t.Image, &t.Source, &settings, &created); err != nil {
			return nil, fmt.Errorf("list templates: %w", err)
		}
		if err := json.Unmarshal([]byte(settings), &t.Settings); err != nil {
			return nil, fmt.Errorf("template %s: settings: %w", t.ID, err)
		}
		t.CreatedAt = fromMs(created)
		out = append(out, t)
	}
	return out, rows.Err()
}

// GetTemplate implements templates.Store.
func (s *Store) GetTemplate(ctx context.Context, tenantID, ref string) (templates.Template, error) {
	rows, err := s.queryTemplates(ctx, `(tenant_id IS NULL OR tenant_id = ?2) AND (name = ?3 OR id = ?3)`, tenantID, ref)
	if err != nil {
		return templates.Template{}, err
	}
	return rules.PickTemplate(rows, tenantID, ref)
}

// TemplateByID implements templates.Store.
func (s *Store) TemplateByID(ctx context.Context, id string) (templates.Template, error) {
	rows, err := s.queryTemplates(ctx, `id = ?2`, id)
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
		return s.queryTemplates(ctx, `1 = 1`)
	}
	return s.queryTemplates(ctx, `(tenant_id IS NULL OR tenant_id = ?2)`, tenantID)
}

// DeleteTemplate implements templates.Store.
func (s *Store) DeleteTemplate(ctx context.Context, tenantID, id string) error {
	if !rules.Visible(ctx, tenantID) {
		return rules.TemplateNotFound(id)
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM templates WHERE id = ? AND COALESCE(tenant_id, '') = ?`, id, tenantID)
	if err != nil {
		return fmt.Errorf("delete template %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return rules.TemplateNotFound(id)
	}
	return nil
}
