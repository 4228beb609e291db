package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/templates"
)

var _ templates.Store = (*Store)(nil)

func cloneTemplate(t templates.Template) templates.Template {
	t.Settings.Env = maps.Clone(t.Settings.Env)
	t.Settings.Kernels = slices.Clone(t.Settings.Kernels)
	t.Settings.Prestart = slices.Clone(t.Settings.Prestart)
	return t
}

// CreateTemplate implements templates.Store.
func (s *Store) CreateTemplate(ctx context.Context, t templates.Template) (templates.Template, error) {
	if err := rules.PrepareTemplate(ctx, &t, time.Now()); err != nil {
		return templates.Template{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tenants[t.TenantID]; !ok && t.TenantID != "" {
		return templates.Template{}, tenantMissing(t.TenantID)
	}
	for _, o := range s.templates {
		if o.ID == t.ID || o.TenantID == t.TenantID && o.Name == t.Name {
			return templates.Template{}, fmt.Errorf("template %q: %w", t.Name, errdefs.ErrAlreadyExists)
		}
	}
	if s.templates == nil {
		s.templates = map[string]templates.Template{}
	}
	s.templates[t.ID] = cloneTemplate(t)
	return cloneTemplate(t), nil
}

// visibleTemplates returns tenantID's and the public templates ctx may see.
// Precondition: s.mu is held.
func (s *Store) visibleTemplates(ctx context.Context, tenantID string, all bool) []templates.Template {
	var out []templates.Template
	for _, t := range s.templates {
		if (all || t.Public() || t.TenantID == tenantID) && rules.TemplateVisible(ctx, t.TenantID) {
			out = append(out, cloneTemplate(t))
		}
	}
	rules.SortTemplates(out)
	return out
}

// GetTemplate implements templates.Store.
func (s *Store) GetTemplate(ctx context.Context, tenantID, ref string) (templates.Template, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rules.PickTemplate(s.visibleTemplates(ctx, tenantID, false), tenantID, ref)
}

// TemplateByID implements templates.Store.
func (s *Store) TemplateByID(ctx context.Context, id string) (templates.Template, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[id]
	if !ok || !rules.TemplateVisible(ctx, t.TenantID) {
		return templates.Template{}, rules.TemplateNotFound(id)
	}
	return cloneTemplate(t), nil
}

// ListTemplates implements templates.Store.
func (s *Store) ListTemplates(ctx context.Context, tenantID string, all bool) ([]templates.Template, error) {
	if err := rules.CheckAll(ctx, all); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.visibleTemplates(ctx, tenantID, all), nil
}

// DeleteTemplate implements templates.Store.
func (s *Store) DeleteTemplate(ctx context.Context, tenantID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.templates[id]
	if !ok || t.TenantID != tenantID || !rules.Visible(ctx, tenantID) {
		return rules.TemplateNotFound(id)
	}
	delete(s.templates, id)
	return nil
}

// dropTemplates forgets tenantID's templates (the tenant was deleted).
func (s *Store) dropTemplates(tenantID string) {
	for id, t := range s.templates {
		if t.TenantID == tenantID {
			delete(s.templates, id)
		}
	}
}
