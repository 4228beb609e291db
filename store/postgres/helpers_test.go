package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	std "strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
)

// TestHelperFunctions: the specifications' touch_execution_context and
// get_expired_execution_contexts (000 §5.3, migration 9) do what they say,
// by the database's clock, and row-level security confines a caller
// scoped to a tenant (sandlot_app) to that tenant's rows, as any statement.
func TestHelperFunctions(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.SchemaURL(t))
	pool := s.Pool()
	var dbNow time.Time
	if err := pool.QueryRow(ctx, "SELECT now()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	mk := func(tenantID, conv string, expires time.Duration) string {
		t.Helper()
		rec := &contexts.Record{Identity: contexts.Identity{TenantID: tenantID, ConversationID: conv, PathID: "main"},
			ExpiresAt: dbNow.Add(expires)}
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return rec.ID
	}
	a1 := mk("A", "a1", -time.Hour)
	a2 := mk("A", "a2", time.Hour)
	fixed := mk("A", "fixed", -2*time.Hour)
	paused := mk("A", "paused", -3*time.Minute)
	ended := mk("A", "ended", -4*time.Hour)
	b1 := mk("B", "b1", -30*time.Minute)
	for _, q := range []string{
		"UPDATE execution_contexts SET fixed_expiry = true WHERE id = '" + fixed + "'",
		"UPDATE execution_contexts SET paused_at = now() WHERE id = '" + paused + "'",
		"UPDATE execution_contexts SET state = 'terminated' WHERE id = '" + ended + "'",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	// scoped runs fn as the daemon's tenant-scoped role for tenant (""
	// the owner, unscoped).
	scoped := func(tenantID string, fn func(tx pgx.Tx)) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if tenantID != "" {
			if _, err := tx.Exec(ctx, `SELECT set_config('role', $1, true), set_config('app.tenant_id', $2, true)`, postgres.AppRole, tenantID); err != nil {
				t.Fatal(err)
			}
		}
		fn(tx)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	expired := func(tenantID, args string) []string {
		t.Helper()
		var ids []string
		scoped(tenantID, func(tx pgx.Tx) {
			rows, err := tx.Query(ctx, "SELECT id::text FROM get_expired_execution_contexts("+args+")")
			if err != nil {
				t.Fatal(err)
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
		})
		return ids
	}
	for _, tc := range []struct {
		name, tenant, args string
		want               []string
	}{
		{"all, soonest first", "", "0", []string{fixed, a1, b1, paused}},
		{"at most two", "", "2", []string{fixed, a1}},
		{"NULL is all", "", "NULL", []string{fixed, a1, b1, paused}},
		{"a later cutoff", "", "0, now() + interval '2 hours'", []string{fixed, a1, b1, paused, a2}},
		{"tenant A only", "A", "0", []string{fixed, a1, paused}},
		{"tenant B only", "B", "10", []string{b1}},
		{"an unknown tenant", "C", "0", nil},
	} {
		if got := expired(tc.tenant, tc.args); std.Join(got, ",") != std.Join(tc.want, ",") {
			t.Errorf("get_expired_execution_contexts(%s) as %q = %v, want %v", tc.args, tc.tenant, got, tc.want)
		}
	}

	touch := func(tenantID, id string, minutes int) (*time.Time, error) {
		t.Helper()
		var exp *time.Time
		var err error
		tx, berr := pool.Begin(ctx)
		if berr != nil {
			t.Fatal(berr)
		}
		defer tx.Rollback(ctx)
		if tenantID != "" {
			if _, err := tx.Exec(ctx, `SELECT set_config('role', $1, true), set_config('app.tenant_id', $2, true)`, postgres.AppRole, tenantID); err != nil {
				t.Fatal(err)
			}
		}
		if err = tx.QueryRow(ctx, "SELECT touch_execution_context($1, $2)", id, minutes).Scan(&exp); err == nil {
			err = tx.Commit(ctx)
		}
		return exp, err
	}
	before := time.Now()
	exp, err := touch("", a1, 30)
	if err != nil || exp == nil {
		t.Fatalf("touch_execution_context(a1, 30) = %v, %v", exp, err)
	}
	if r, _ := s.Get(ctx, a1); !r.ExpiresAt.Equal(*exp) || r.ExpiresAt.Sub(r.LastUsedAt) != 30*time.Minute ||
		r.LastUsedAt.Before(before.Add(-time.Minute)) {
		t.Fatalf("a1 after a touch of 30 minutes: lastUsedAt %v, expiresAt %v (returned %v)", r.LastUsedAt, r.ExpiresAt, exp)
	}
	if exp, err := touch("A", a2, 5); err != nil || exp == nil {
		t.Fatalf("tenant A touching its own context: %v, %v", exp, err)
	}
	fixedBefore, _ := s.Get(ctx, fixed)
	if exp, err := touch("", fixed, 30); err != nil || exp == nil || !exp.Equal(fixedBefore.ExpiresAt) {
		t.Fatalf("a fixed expiry moved: %v, %v (was %v)", exp, err, fixedBefore.ExpiresAt)
	}
	bBefore, _ := s.Get(ctx, b1)
	for _, tc := range []struct{ name, tenant, id string }{
		{"ended", "", ended}, {"paused", "", paused}, {"absent", "", uuid.NewString()}, {"another tenant's", "A", b1},
	} {
		if exp, err := touch(tc.tenant, tc.id, 30); err != nil || exp != nil {
			t.Errorf("touching an %s context = %v, %v; want NULL", tc.name, exp, err)
		}
	}
	if r, _ := s.Get(ctx, b1); !r.ExpiresAt.Equal(bBefore.ExpiresAt) {
		t.Fatalf("tenant A moved tenant B's expiry: %v", r.ExpiresAt)
	}
	var pe *pgconn.PgError
	if _, err := touch("", a1, 0); !errors.As(err, &pe) || pe.Code != "22023" {
		t.Fatalf("a TTL of 0 minutes: %v, want SQLSTATE 22023", err)
	}

	// Who may call them: the owner and sandlot_app, not PUBLIC.
	role := "sandlot_fn_" + strings(uuid.NewString())[:12]
	if _, err := pool.Exec(ctx, "CREATE ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP ROLE "+role) })
	for _, fn := range []string{"touch_execution_context(uuid, integer)", "get_expired_execution_contexts(integer, timestamptz)"} {
		for who, want := range map[string]bool{postgres.AppRole: true, role: false} {
			var ok bool
			if err := pool.QueryRow(ctx, "SELECT has_function_privilege($1, $2, 'EXECUTE')", who, fn).Scan(&ok); err != nil || ok != want {
				t.Errorf("%s may execute %s: %v (%v), want %v", who, fn, ok, err, want)
			}
		}
	}
}

// TestIndexesUsed: the indexes the specifications name (000 §5.2, 001
// §4.1) exist and serve their queries: with sequential scans off, each
// query's plan reads its index. The expiry query is the store's own
// (get_expired_execution_contexts, inlined by the planner).
func TestIndexesUsed(t *testing.T) {
	ctx := context.Background()
	u := pgtest.SchemaURL(t)
	s := open(t, u)
	for i := range 50 {
		rec := &contexts.Record{Identity: contexts.Identity{TenantID: fmt.Sprintf("t%d", i%5), ConversationID: fmt.Sprintf("c%d", i), PathID: "main"},
			ExpiresAt: time.Now().Add(time.Duration(i) * time.Minute)}
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.State, rec.SandboxID = contexts.StateReady, fmt.Sprintf("sb-%d", i)
		if err := s.Update(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	pu, _ := url.Parse(u)
	var defs []string
	rows, err := s.Pool().Query(ctx, "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'execution_contexts'", pu.Query().Get("search_path"))
	if err != nil {
		t.Fatal(err)
	}
	if defs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	all := std.Join(defs, "\n")
	for _, tc := range []struct {
		index, def, query string
		or                string // another index that serves the query as well
	}{
		// A tenant's active contexts (the tenant limit's count): the
		// planner of Postgres 15 prefers the identity index, which leads
		// with tenant_id under the same predicate, to the tenant index.
		{"execution_contexts_tenant_active", "(tenant_id) WHERE (state = ANY",
			"SELECT count(*) FROM execution_contexts WHERE tenant_id = 't1' AND state IN ('creating', 'ready')",
			"execution_contexts_active_identity"},
		{"execution_contexts_active_identity", "(tenant_id, user_id, conversation_id, path_id) WHERE (state = ANY",
			"SELECT id FROM execution_contexts WHERE tenant_id = 't1' AND user_id = '' AND conversation_id = 'c1' AND path_id = 'main' AND state IN ('creating', 'ready')", ""},
		// One user's contexts (GET /v1/contexts?userId=).
		{"execution_contexts_user", "(tenant_id, user_id, conversation_id) WHERE (user_id <> ''",
			"SELECT id FROM execution_contexts WHERE tenant_id = 't1' AND user_id = 'u1' ORDER BY id", ""},
		{"execution_contexts_expiry", "(expires_at) WHERE (state = ANY",
			"SELECT id FROM get_expired_execution_contexts(10, now())", ""},
		{"execution_contexts_sandbox", "(sandbox_id) WHERE (sandbox_id <> ''",
			"SELECT id FROM execution_contexts WHERE sandbox_id = 'sb-7'", ""},
		{"execution_contexts_conversation", "(tenant_id, conversation_id)",
			"SELECT id FROM execution_contexts WHERE tenant_id = 't1' AND conversation_id = 'c6' ORDER BY id", ""},
	} {
		t.Run(tc.index+" "+tc.query, func(t *testing.T) {
			if !std.Contains(all, tc.index+" ON ") || !std.Contains(all, tc.def) {
				t.Fatalf("no index %s %s among:\n%s", tc.index, tc.def, all)
			}
			tx, err := s.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
				t.Fatal(err)
			}
			rows, err := tx.Query(ctx, "EXPLAIN "+tc.query)
			if err != nil {
				t.Fatal(err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			plan := std.Join(lines, "\n") + "\n"
			uses := func(index string) bool { return index != "" && std.Contains(plan, " using "+index+" on ") }
			if !uses(tc.index) && !uses(tc.or) {
				t.Fatalf("%s does not use %s:\n%s", tc.query, tc.index, plan)
			}
		})
	}
}
