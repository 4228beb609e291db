package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// TestIndexesUsedByTheStore (000 §5.2, 001 §4.1): the indexes of execution_contexts
// exist, and the store's own queries use them on a table big enough for
// the planner to care (20,000 rows, most of them terminated): ListExpired
// the expiry index, CountActive the tenant's active index, GetActive the
// active identity's, List by conversation the conversation index. Use is
// read from pg_stat_user_indexes, which the server updates within seconds.
func TestIndexesUsedByTheStore(t *testing.T) {
	u := pgtest.SchemaURL(t)
	s := open(t, u)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// 50 tenants, 2,000 conversations; one row in 20 active.
	if _, err := conn.Exec(ctx, `INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, created_at, last_used_at, expires_at)
		SELECT gen_random_uuid(), 't' || (i % 50), 'c' || (i % 2000), 'p' || i,
			CASE WHEN i % 20 = 0 THEN 'ready' ELSE 'terminated' END,
			now(), now(), now() + (i % 600) * interval '1 minute'
		FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE execution_contexts`); err != nil {
		t.Fatal(err)
	}
	scans := func() map[string]int64 {
		t.Helper()
		if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, `SELECT indexrelname, idx_scan FROM pg_stat_user_indexes
			WHERE relname = 'execution_contexts' AND schemaname = current_schema()`)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			m[name] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := scans()
	for _, name := range []string{"execution_contexts_expiry", "execution_contexts_tenant_active",
		"execution_contexts_active_identity", "execution_contexts_conversation"} {
		if _, ok := before[name]; !ok {
			t.Fatalf("no index %s; the table has %v", name, before)
		}
	}
	for _, step := range []struct {
		index string
		call  func() error
	}{
		{"execution_contexts_expiry", func() error {
			_, err := s.ListExpired(ctx, time.Now().Add(5*time.Minute), 100)
			return err
		}},
		{"execution_contexts_tenant_active", func() error { _, err := s.CountActive(ctx, "t7", "", ""); return err }},
		{"execution_contexts_active_identity", func() error {
			_, err := s.GetActive(ctx, contexts.Identity{TenantID: "t0", ConversationID: "c0", PathID: "p2000"})
			return err
		}},
		{"execution_contexts_conversation", func() error {
			_, err := s.List(ctx, contexts.Filter{TenantID: "t3", ConversationID: "c3"})
			return err
		}},
	} {
		t.Run(step.index, func(t *testing.T) {
			from := scans()[step.index]
			if err := step.call(); err != nil {
				t.Fatal(err)
			}
			// The store's connection reports its counts when idle, at
			// most about 10 s later.
			deadline := time.Now().Add(time.Minute)
			for scans()[step.index] == from {
				if time.Now().After(deadline) {
					t.Fatalf("the query did not scan %s within a minute: %v", step.index, scans())
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}
