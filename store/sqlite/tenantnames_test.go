package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/sqlite"
	"github.com/sandlot/sandlot/store/storetest"
)

// TestUpgradeToTenantNames opens a database made by the migrations before
// version 8, where two tenants share a name: migration 8 renames the
// younger before it makes names unique.
func TestUpgradeToTenantNames(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sandlot.db")
	ms, err := migrate.Load(os.DirFS("."), "migrations")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	for _, m := range ms {
		if m.Version >= 8 {
			break
		}
		exec(m.SQL)
		exec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name)
	}
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
