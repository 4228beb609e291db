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

// TestUpgradeToUsers opens a schema made by the migrations before version
// 10, holding an active context: migration 10 gives it no user, keeps its
// key unique, and lets a user of the same conversation have a context of
// its own.
func TestUpgradeToUsers(t *testing.T) {
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
		if m.Version >= 10 {
			break
		}
		exec(m.SQL)
		exec(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
	}
	now := time.Now()
	exec(`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, created_at, last_used_at, expires_at)
		VALUES ($1, 't', 'c', 'main', 'ready', 'sb-1', $2, $2, $3)`, storetest.LegacyContextID, now, now.Add(time.Hour))
	conn.Close(ctx)
	storetest.CheckLegacyUser(t, open(t, u))
}
