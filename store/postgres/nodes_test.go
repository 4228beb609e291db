package postgres_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// TestUpgradeToNodes opens a schema written by a binary before nodes
// existed (version 1, one active record): migration 2 applies, the record
// has no node, and a node can claim it.
func TestUpgradeToNodes(t *testing.T) {
	ctx := context.Background()
	u := pgtest.SchemaURL(t)
	v1, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	const id = "6d1f3a52-0c8e-4f55-9d5a-1b2c3d4e5f60"
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
		string(v1),
		`INSERT INTO schema_migrations (version, name) VALUES (1, '0001_init.sql')`,
		`INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, sandbox_id, created_at, last_used_at, expires_at)
			VALUES ('` + id + `', 't', 'c', 'main', 'ready', 'sb-1', now(), now(), now() + interval '1 hour')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	conn.Close(ctx)

	s := open(t, u)
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

// TestNodesNotReachableAsAppRole: node and cluster leases are system rows. A statement
// running as sandlot_app (every tenant-scoped statement) can neither read
// nor write the nodes and leases tables, so no tenant path can forge or
// see a lease.
func TestNodesNotReachableAsAppRole(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.SchemaURL(t))
	if err := s.Heartbeat(ctx, "node-a", time.Now()); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.AcquireLease(ctx, "cleanup", "node-a", time.Minute); !ok || err != nil {
		t.Fatalf("AcquireLease = %v, %v", ok, err)
	}
	for _, q := range []string{
		`SELECT count(*) FROM nodes`,
		`INSERT INTO nodes (id, heartbeat_at) VALUES ('forged', now())`,
		`UPDATE nodes SET heartbeat_at = now()`,
		// A lease forged or stretched from a tenant's statement would
		// stop the cluster's cleanup (expiry, lost records, the pool).
		`SELECT count(*) FROM leases`,
		`INSERT INTO leases (name, holder, expires_at) VALUES ('cleanup', 'forged', now() + interval '1 year')`,
		`UPDATE leases SET expires_at = now() + interval '1 year'`,
		`DELETE FROM leases`,
	} {
		t.Run(q, func(t *testing.T) {
			err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT set_config('role', $1, true), set_config('app.tenant_id', 't', true)`, postgres.AppRole); err != nil {
					t.Fatal(err)
				}
				_, err := tx.Exec(ctx, q)
				return err
			})
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "42501" {
				t.Fatalf("as %s: err = %v, want SQLSTATE 42501", postgres.AppRole, err)
			}
		})
	}
}
