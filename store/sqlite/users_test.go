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

// TestUpgradeToUsers opens a database made by the migrations before
// version 10, holding an active context: migration 10 gives it no user,
// keeps its key unique, and lets a user of the same conversation have a
// context of its own.
func TestUpgradeToUsers(t *testing.T) {
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
		if m.Version >= 10 {
			break
		}
		exec(m.SQL)
		exec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name)
	}
	exec(`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, created_at, last_used_at, expires_at, updated_at)
		VALUES (?, 't', 'c', 'main', 'ready', 'sb-1', 1, 1, 9999999999999, 1)`, storetest.LegacyContextID)
	db.Close()
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Version(ctx); err != nil || v < 10 {
		t.Fatalf("Version = %d, %v; want at least 10", v, err)
	}
	storetest.CheckLegacyUser(t, s)
}
