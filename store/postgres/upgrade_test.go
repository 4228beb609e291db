package postgres_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	str "strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
	"github.com/sandlot/sandlot/store/storetest"
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

var update = flag.Bool("update", false, "write the upgrade fixtures testdata lacks (a new schema's); existing ones are never rewritten")

// fixturePath is the fixture of schema version: an SQL script that makes
// a database as a daemon of that version left it, in the schema of the
// connection's search_path.
func fixturePath(version int) string {
	return filepath.Join("testdata", fmt.Sprintf("schema-%04d.sql", version))
}

// fixtureRows are storetest's fixture rows in the columns of schema
// version.
func fixtureRows(version int) string {
	const at = "to_timestamp(1700000000)"
	q := func(s string) string { return "'" + str.ReplaceAll(s, "'", "''") + "'" }
	var b str.Builder
	fmt.Fprintf(&b, "INSERT INTO tenants (id, name, guard_mode, admin, key_prefix, created_at) VALUES (%s, %s, 'enforce', false, %s, %s);\n",
		q(storetest.FixtureTenantID), q(storetest.FixtureTenantName), q(storetest.FixtureKeyPrefix), at)
	if version >= 16 {
		fmt.Fprintf(&b, "INSERT INTO api_keys (id, hash, tenant_id, name, prefix, created_at) VALUES (%s, %s, %s, 'first', %s, %s);\n",
			q(storetest.FixtureKeyID), q(storetest.FixtureKeyHash()), q(storetest.FixtureTenantID), q(storetest.FixtureKeyPrefix), at)
	} else {
		fmt.Fprintf(&b, "INSERT INTO api_keys (hash, tenant_id, created_at) VALUES (%s, %s, %s);\n", q(storetest.FixtureKeyHash()), q(storetest.FixtureTenantID), at)
	}
	fmt.Fprintf(&b, "INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, provider, template, "+
		"created_at, last_used_at, expires_at, execution_count, total_execution_time_ms, metadata, updated_at) "+
		"VALUES (%s, %s, %s, 'main', 'ready', 'sb-1', 'local', 'default', %s, %s, '2100-01-01T00:00:00Z', 3, 120, '{\"team\":\"blue\"}', %s);\n",
		q(storetest.FixtureLiveID), q(storetest.FixtureTenantID), q(storetest.FixtureConv), at, at, at)
	fmt.Fprintf(&b, "INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, reason, created_at, last_used_at, "+
		"expires_at, terminated_at, updated_at) VALUES (%s, %s, 'conv-0', 'main', 'terminated', 'expired', %s, %s, %s, %s, %s);\n",
		q(storetest.FixtureEndedID), q(storetest.FixtureTenantID), at, at, at, at, at)
	fmt.Fprintf(&b, "INSERT INTO audit_events (tenant_id, context_id, kind, detail, at) VALUES (%s, %s, 'context.created', '{\"template\":\"default\"}', %s);\n",
		q(storetest.FixtureTenantID), q(storetest.FixtureLiveID), at)
	fmt.Fprintf(&b, "INSERT INTO audit_events (tenant_id, kind, detail, at) VALUES ('', 'tenant.created', '{}', to_timestamp(1700000001));\n")
	if version >= 2 {
		fmt.Fprintf(&b, "UPDATE execution_contexts SET node = 'node-a';\nINSERT INTO nodes (id, heartbeat_at) VALUES ('node-a', %s);\n", at)
	}
	if version >= storetest.FixtureTemplatesFrom {
		fmt.Fprintf(&b, "INSERT INTO templates (id, tenant_id, name, image, source, settings, created_at) VALUES (%s, %s, %s, %s, %s, '{\"resources\":{\"memoryBytes\":1073741824}}', %s);\n",
			q(storetest.FixtureTemplateID), q(storetest.FixtureTenantID), q(storetest.FixtureTemplate), q(storetest.FixtureImage), q(storetest.FixtureSource), at)
	}
	return b.String()
}

// writeFixture writes the fixture of schema version: its migrations as
// released, their schema_migrations rows, and the fixture rows.
func writeFixture(t *testing.T, ms []migrate.Migration, version int) {
	t.Helper()
	var b str.Builder
	fmt.Fprintf(&b, "-- A sandlot database at schema %d, as a daemon of that version left it (store/postgres TestUpgradeFromEverySchema).\n", version)
	b.WriteString("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());\n")
	for _, m := range ms {
		if m.Version > version {
			break
		}
		fmt.Fprintf(&b, "\n-- %s\n%s\nINSERT INTO schema_migrations (version, name) VALUES (%d, '%s');\n", m.Name, str.TrimSpace(m.SQL), m.Version, m.Name)
	}
	b.WriteString("\n-- The rows (store/storetest/fixture.go).\n")
	b.WriteString(fixtureRows(version))
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixturePath(version), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeFromEverySchema loads the fixture of every earlier schema
// version (and of the newest) into a schema of its own and opens it with
// today's store: it migrates to the newest and finds every tenant, key,
// context, audit event and template the fixture holds. A new migration
// needs its fixture: the test fails until one is written (-update) and
// committed.
func TestUpgradeFromEverySchema(t *testing.T) {
	ctx := context.Background()
	ms, err := migrate.Load(os.DirFS("."), "migrations")
	if err != nil {
		t.Fatal(err)
	}
	latest := ms[len(ms)-1].Version
	for _, m := range ms {
		t.Run(fmt.Sprintf("from %04d", m.Version), func(t *testing.T) {
			if _, err := os.Stat(fixturePath(m.Version)); err != nil && *update {
				writeFixture(t, ms, m.Version)
			}
			script, err := os.ReadFile(fixturePath(m.Version))
			if err != nil {
				t.Fatalf("no fixture of schema %d (%v): run go test -run TestUpgradeFromEverySchema -update ./store/postgres and commit it", m.Version, err)
			}
			url := pgtest.SchemaURL(t)
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, string(script)); err != nil {
				t.Fatalf("load the fixture: %v", err)
			}
			conn.Close(ctx)
			st, err := postgres.Inspect(ctx, url)
			if err != nil || st.Current != m.Version {
				t.Fatalf("the fixture is at schema %d (%v), want %d", st.Current, err, m.Version)
			}
			s, err := postgres.Open(ctx, url, postgres.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if v, err := s.Version(ctx); err != nil || v != latest {
				t.Fatalf("Version = %d, %v; want %d", v, err, latest)
			}
			storetest.CheckFixture(t, s, m.Version)
		})
	}
}

// TestInspect: Inspect (migrate --dry-run, doctor) reports the fixture of
// schema 7's pending migrations and changes nothing; a schema a newer
// sandlot migrated is reported with the error Open gives.
func TestInspect(t *testing.T) {
	ctx := context.Background()
	script, err := os.ReadFile(fixturePath(7))
	if err != nil {
		t.Fatal(err)
	}
	url := pgtest.SchemaURL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, string(script)); err != nil {
		t.Fatal(err)
	}
	tables := func() (n int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := tables()
	ms, err := migrate.Load(os.DirFS("."), "migrations")
	if err != nil {
		t.Fatal(err)
	}
	after7 := 0 // the migrations after 7 (numbers may skip one another branch holds)
	for _, m := range ms {
		if m.Version > 7 {
			after7++
		}
	}
	st, err := postgres.Inspect(ctx, url)
	if err != nil || st.Current != 7 || len(st.Pending) != after7 || st.Pending[0].Version != 8 || st.Err() != nil {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	var recorded int
	conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&recorded)
	if recorded != 7 || tables() != before {
		t.Errorf("Inspect changed the schema: %d migrations recorded, %d tables (was %d)", recorded, tables(), before)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	st, err = postgres.Inspect(ctx, url)
	if err != nil || st.Err() == nil || !str.Contains(st.Err().Error(), "newer than this sandlot's") {
		t.Fatalf("Inspect of a newer schema = %+v, %v", st, err)
	}
	if _, err := postgres.Open(ctx, url, postgres.Config{}); err == nil || !str.Contains(err.Error(), "schema is at version 9999") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}
