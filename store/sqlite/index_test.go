package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/store/sqlite"
)

// TestSandboxIndex: migration 9 gives SQLite the index by sandbox too, and
// a lookup by sandbox id reads it. (The helper functions of the same
// migration on Postgres have no SQLite form: docs/stores.md.)
func TestSandboxIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandlot.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`EXPLAIN QUERY PLAN SELECT id FROM execution_contexts WHERE sandbox_id = 'sb-1'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if got := strings.Join(plan, "; "); !strings.Contains(got, "INDEX execution_contexts_sandbox (sandbox_id=?)") {
		t.Fatalf("a lookup by sandbox id: %s", got)
	}
}
