package sqlite_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/sqlite"
	"github.com/sandlot/sandlot/store/storetest"
)

// databaseBefore makes a SQLite database at a new path with the schema of
// the migrations before version only, as a daemon of that release left it,
// for the upgrade tests; exec runs SQL in it (failing the test), and the
// caller closes db before opening the store on path.
func databaseBefore(t *testing.T, version int) (path string, db *sql.DB, exec func(q string, args ...any)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "sandlot.db")
	ms, err := migrate.Load(os.DirFS("."), "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if db, err = sql.Open("sqlite", path); err != nil {
		t.Fatal(err)
	}
	exec = func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		exec(m.SQL)
		exec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name)
	}
	return path, db, exec
}

var update = flag.Bool("update", false, "write the upgrade fixtures testdata lacks (a new schema's); existing ones are never rewritten")

// fixturePath is the fixture of schema version: a database as a daemon of
// that version left it, gzipped.
func fixturePath(version int) string {
	return filepath.Join("testdata", fmt.Sprintf("schema-%04d.db.gz", version))
}

// writeFixture makes the fixture of schema version: the migrations up to
// it and storetest's fixture rows in that version's columns.
func writeFixture(t *testing.T, version int) {
	t.Helper()
	path, db, exec := databaseBefore(t, version+1)
	const at = 1700000000000
	exec(`INSERT INTO tenants (id, name, guard_mode, admin, key_prefix, created_at) VALUES (?, ?, 'enforce', 0, ?, ?)`,
		storetest.FixtureTenantID, storetest.FixtureTenantName, storetest.FixtureKeyPrefix, at)
	if version >= 16 {
		exec(`INSERT INTO api_keys (id, hash, tenant_id, name, prefix, created_at) VALUES (?, ?, ?, 'first', ?, ?)`,
			storetest.FixtureKeyID, storetest.FixtureKeyHash(), storetest.FixtureTenantID, storetest.FixtureKeyPrefix, at)
	} else {
		exec(`INSERT INTO api_keys (hash, tenant_id, created_at) VALUES (?, ?, ?)`, storetest.FixtureKeyHash(), storetest.FixtureTenantID, at)
	}
	exec(`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, provider, template,
		created_at, last_used_at, expires_at, execution_count, total_execution_time_ms, metadata, updated_at)
		VALUES (?, ?, ?, 'main', 'ready', 'sb-1', 'local', 'default', ?, ?, 4102444800000, 3, 120, '{"team":"blue"}', ?)`,
		storetest.FixtureLiveID, storetest.FixtureTenantID, storetest.FixtureConv, at, at, at)
	exec(`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, reason, created_at, last_used_at,
		expires_at, terminated_at, updated_at) VALUES (?, ?, 'conv-0', 'main', 'terminated', 'expired', ?, ?, ?, ?, ?)`,
		storetest.FixtureEndedID, storetest.FixtureTenantID, at, at, at, at, at)
	exec(`INSERT INTO audit_events (tenant_id, context_id, kind, detail, at) VALUES (?, ?, 'context.created', '{"template":"default"}', ?)`,
		storetest.FixtureTenantID, storetest.FixtureLiveID, at)
	exec(`INSERT INTO audit_events (tenant_id, kind, detail, at) VALUES ('', 'tenant.created', '{}', ?)`, at+1)
	if version >= 2 {
		exec(`UPDATE execution_contexts SET node = 'node-a'`)
		exec(`INSERT INTO nodes (id, heartbeat_at) VALUES ('node-a', ?)`, at)
	}
	if version >= storetest.FixtureTemplatesFrom {
		exec(`INSERT INTO templates (id, tenant_id, name, image, source, settings, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			storetest.FixtureTemplateID, storetest.FixtureTenantID, storetest.FixtureTemplate, storetest.FixtureImage,
			storetest.FixtureSource, `{"resources":{"memoryBytes":1073741824}}`, at)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(raw)
	zw.Close()
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixturePath(version), gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// openFixture copies the fixture of schema version to a new file and
// returns its path.
func openFixture(t *testing.T, version int) string {
	t.Helper()
	f, err := os.Open(fixturePath(version))
	if err != nil {
		t.Fatalf("no fixture of schema %d (%v): run go test -run TestUpgradeFromEverySchema -update ./store/sqlite and commit it", version, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sandlot.db")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, io.LimitReader(zr, 64<<20)); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUpgradeFromEverySchema opens the fixture of every earlier schema
// version (and of the newest) with today's store: it migrates to the
// newest and finds every tenant, key, context, audit event and template
// the fixture holds. A new migration needs its fixture: the test fails
// until one is written (-update) and committed.
func TestUpgradeFromEverySchema(t *testing.T) {
	ms, err := migrate.Load(os.DirFS("."), "migrations")
	if err != nil {
		t.Fatal(err)
	}
	latest := ms[len(ms)-1].Version
	for _, m := range ms {
		t.Run(fmt.Sprintf("from %04d", m.Version), func(t *testing.T) {
			if _, err := os.Stat(fixturePath(m.Version)); err != nil && *update {
				writeFixture(t, m.Version)
			}
			path := openFixture(t, m.Version)
			st, exists, err := sqlite.Inspect(context.Background(), path)
			if err != nil || !exists || st.Current != m.Version {
				t.Fatalf("the fixture is at schema %d (exists %v, %v), want %d", st.Current, exists, err, m.Version)
			}
			s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if v, err := s.Version(context.Background()); err != nil || v != latest {
				t.Fatalf("Version = %d, %v; want %d", v, err, latest)
			}
			storetest.CheckFixture(t, s, m.Version)
		})
	}
}
