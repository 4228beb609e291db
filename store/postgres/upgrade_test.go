package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// schemaBefore makes a schema of its own with the migrations before
// version only, as a daemon of that release left it, for the upgrade
// tests: it returns the schema's URL, a connection to it (the caller
// closes it before opening the store) and exec, which runs SQL there and
// fails the test on an error.
func schemaBefore(ctx context.Context, t *testing.T, version int) (url string, conn *pgx.Conn, exec func(q string, args ...any)) {
	t.Helper()
	url = pgtest.SchemaURL(t)
	ms, err := migrate.Load(os.DirFS("."), "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if conn, err = pgx.Connect(ctx, url); err != nil {
		t.Fatal(err)
	}
	exec = func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		exec(m.SQL)
		exec(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
	}
	return url, conn, exec
}
