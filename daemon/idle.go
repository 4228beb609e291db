package daemon

import (
	"context"
	"time"

	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// idleSuspendOf is the manager's Config.IdleSuspendOf: the smaller of the
// idle suspend a context's template (templates.Settings) and its tenant
// (tenant.Tenant) ask for, 0 when neither does. The manager takes the
// smaller of that and serve's --idle-suspend (docs/state.md, "Suspend to
// disk"). A template or tenant that cannot be read asks for nothing.
func idleSuspendOf(cat *templates.Catalog, tenants tenant.Store) func(ctx context.Context, tenantID, template string) time.Duration {
	return func(ctx context.Context, tenantID, template string) time.Duration {
		var d time.Duration
		pick := func(seconds int64) {
			if o := time.Duration(seconds) * time.Second; o > 0 && (d == 0 || o < d) {
				d = o
			}
		}
		if cat != nil && template != "" {
			t, err := cat.ByID(ctx, template)
			if err != nil {
				t, err = cat.Resolve(ctx, tenantID, template)
			}
			if err == nil {
				pick(t.Settings.IdleSuspendSeconds)
			}
		}
		if t, err := tenants.GetTenant(ctx, tenantID); err == nil {
			pick(t.IdleSuspendSeconds)
		}
		return d
	}
}
