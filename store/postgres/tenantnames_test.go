package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandlot/sandlot/store/storetest"
)

// TestUpgradeToTenantNames opens a schema made by the migrations before
// version 8, where two tenants share a name: migration 8 renames the
// younger before it makes names unique.
func TestUpgradeToTenantNames(t *testing.T) {
	ctx := context.Background()
	u, conn, exec := schemaBefore(ctx, t, 8)
	for _, r := range storetest.LegacyTenants() {
		exec(`INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3)`, r.ID, r.Name, time.UnixMilli(r.CreatedMs))
	}
	conn.Close(ctx)
	storetest.CheckTenantNames(t, open(t, u))
}
