package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// TestIdleSuspendOf: the idle suspend a context's template and tenant ask
// for is the smaller of their settings that are set; neither set is 0
// (the manager then keeps serve's --idle-suspend).
func TestIdleSuspendOf(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	for _, tn := range []*tenant.Tenant{{ID: "quick", IdleSuspendSeconds: 60}, {ID: "plain"}} {
		if err := st.CreateTenant(ctx, tn, ""); err != nil {
			t.Fatal(err)
		}
	}
	cat := templates.New(templates.Config{Store: st})
	img := "sha256:" + strings.Repeat("a", 64)
	mk := func(tenantID, name string, seconds int64) string {
		rec, err := st.CreateTemplate(ctx, templates.Template{TenantID: tenantID, Name: name, Image: img, Settings: templates.Settings{IdleSuspendSeconds: seconds}})
		if err != nil {
			t.Fatal(err)
		}
		return rec.ID
	}
	short, long, none := mk("quick", "short", 30), mk("quick", "long", 600), mk("plain", "none", 0)
	plainShort := mk("plain", "short", 30)
	of := idleSuspendOf(cat, st)
	for _, tc := range []struct {
		name, tenant, template string
		want                   time.Duration
	}{
		{"template shorter than tenant", "quick", short, 30 * time.Second},
		{"tenant shorter than template", "quick", long, time.Minute},
		{"neither set", "plain", none, 0},
		{"template only", "plain", plainShort, 30 * time.Second},
		{"unknown template: the tenant's", "quick", "nope", time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := of(ctx, tc.tenant, tc.template); got != tc.want {
				t.Fatalf("%s/%s: %s, want %s", tc.tenant, tc.template, got, tc.want)
			}
		})
	}
}
