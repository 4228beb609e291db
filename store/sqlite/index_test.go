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

// TestAuditKindIndex: the statement ListAuditKind runs reads the index by
// (tenant, kind, id), never a scan of the audit table, which every tenant
// shares (a rare or absent kind would read all of it before LIMIT ends the
// read). A tenant in ctx alone narrows it as an explicit tenant does.
func TestAuditKindIndex(t *testing.T) {
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
	for _, tc := range []struct {
		name, scope, tenant, kind, index string
	}{
		{"tenant and kind", "", "A", "exec", "audit_events_tenant_kind"},
		{"scoped tenant and kind", "A", "A", "exec", "audit_events_tenant_kind"},
		{"scope only, kind", "A", "", "exec", "audit_events_tenant_kind"},
		{"tenant, any kind", "", "A", "", "audit_events_tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, args := sqlite.AuditQuery(tc.scope, tc.tenant, tc.kind, 100)
			rows, err := db.Query(`EXPLAIN QUERY PLAN `+q, args...)
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
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(plan, "; ")
			if strings.Contains(got, "SCAN audit_events") || !strings.Contains(got, "INDEX "+tc.index+" ") {
				t.Fatalf("plan of %q: %s; want a search of %s", q, got, tc.index)
			}
		})
	}
}
