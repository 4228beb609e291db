package postgres_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
	"github.com/sandlot/sandlot/store/storetest"
)

// TestUpgradeToTenantNames opens a schema made by the migrations before
// version 8, where two tenants share a name: migration 8 renames the
// younger before it makes names unique.
func TestUpgradeToTenantNames(t *testing.T) {
	ctx := context.Background()
	u := pgtest.SchemaURL(t)
	ms, err := migrate.Load(os.DirFS("."), "migrations")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range ms {
		if m.Version >= 8 {
			break
		}
		exec(m.SQL)
		exec(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
	}
	for _, r := range storetest.LegacyTenants() {
		exec(`INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3)`, r.ID, r.Name, time.UnixMilli(r.CreatedMs))
	}
	conn.Close(ctx)
	storetest.CheckTenantNames(t, open(t, u))
}
