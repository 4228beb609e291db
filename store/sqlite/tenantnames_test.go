package sqlite_test

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/store/sqlite"
	"github.com/sandlot/sandlot/store/storetest"
)

// TestUpgradeToTenantNames opens a database made by the migrations before
// version 8, where two tenants share a name: migration 8 renames the
// younger before it makes names unique.
func TestUpgradeToTenantNames(t *testing.T) {
	ctx := context.Background()
	path, db, exec := databaseBefore(t, 8)
	for _, r := range storetest.LegacyTenants() {
		exec(`INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)`, r.ID, r.Name, r.CreatedMs)
	}
	db.Close()
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckTenantNames(t, s)
}
