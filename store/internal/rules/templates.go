package rules

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// PrepareTemplate validates t for CreateTemplate under ctx's scope (a
// scoped ctx writes only its own tenant's templates, never public ones)
// and fills its ID and creation time.
func PrepareTemplate(ctx context.Context, t *templates.Template, now time.Time) error {
	if err := CheckTenant(ctx, t.TenantID); err != nil {
		return err
	}
	return templates.Prepare(t, now)
}

// TemplateVisible reports whether a template row of owner (""
// public) is visible to ctx.
func TemplateVisible(ctx context.Context, owner string) bool {
	scope, ok := tenant.FromContext(ctx)
	return !ok || owner == "" || owner == scope
}

// TemplateNotFound is the error for a template ref that names nothing.
func TemplateNotFound(ref string) error {
	return fmt.Errorf("template %q: %w", ref, errdefs.ErrNotFound)
}

// PickTemplate chooses what ref means among rows (tenantID's templates
// and the public ones, already filtered by visibility): tenantID's
// template of that name, else the public one of that name, else the one
// with that id.
func PickTemplate(rows []templates.Template, tenantID, ref string) (templates.Template, error) {
	for _, pass := range []func(t templates.Template) bool{
		func(t templates.Template) bool { return tenantID != "" && t.TenantID == tenantID && t.Name == ref },
		func(t templates.Template) bool { return t.Public() && t.Name == ref },
		func(t templates.Template) bool { return (t.Public() || t.TenantID == tenantID) && t.ID == ref },
	} {
		if i := slices.IndexFunc(rows, pass); i >= 0 {
			return rows[i], nil
		}
	}
	return templates.Template{}, TemplateNotFound(ref)
}

// SortTemplates orders a list by name, public first, then tenant.
func SortTemplates(ts []templates.Template) {
	slices.SortFunc(ts, func(a, b templates.Template) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.TenantID, b.TenantID)
	})
}

// CheckAll refuses a listing of every tenant's templates to a scoped ctx.
func CheckAll(ctx context.Context, all bool) error {
	if scope, ok := tenant.FromContext(ctx); ok && all {
		return fmt.Errorf("tenant %s may not list every tenant's templates: %w", scope, errdefs.ErrPermissionDenied)
	}
	return nil
}
