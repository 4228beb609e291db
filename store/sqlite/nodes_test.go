package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandlot/sandlot/store/sqlite"
)

// TestUpgradeToNodes opens a database written by a binary before nodes
// existed (schema version 1, one active record): migration 2 applies, the
// record has no node, and a node can claim it.
func TestUpgradeToNodes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sandlot.db")
	v1, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	const id = "6d1f3a52-0c8e-4f55-9d5a-1b2c3d4e5f60"
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		string(v1),
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, created_at, last_used_at, expires_at, updated_at)
			VALUES ('` + id + `', 't', 'c', 'main', 'ready', 'sb-1', 1, 1, 9999999999999, 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	db.Close()

	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Version(ctx); err != nil || v < 2 {
		t.Fatalf("Version = %d, %v; want at least 2", v, err)
	}
	rec, err := s.Get(ctx, id)
	if err != nil || rec.Node != "" || rec.SandboxID != "sb-1" {
		t.Fatalf("record from version 1: %+v, %v", rec, err)
	}
	if ok, err := s.Claim(ctx, id, "", "node-a"); !ok || err != nil {
		t.Fatalf("Claim of the version 1 record = %v, %v", ok, err)
	}
}
