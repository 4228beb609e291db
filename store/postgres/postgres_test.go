package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
	"github.com/sandlot/sandlot/store/storetest"
	"github.com/sandlot/sandlot/tenant"
)

// baseURL returns SANDLOT_TEST_POSTGRES, a precondition of these tests.
func baseURL(t testing.TB) string {
	t.Helper()
	return testenv.Env(t, "SANDLOT_TEST_POSTGRES")
}

func strings(id string) string {
	out := make([]byte, 0, 32)
	for _, c := range []byte(id) {
		if c != '-' {
			out = append(out, c)
		}
	}
	return string(out[:16])
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// TestSecretsAtRest reads the table behind the store's back, as the
// schema's owner.
func TestSecretsAtRest(t *testing.T) {
	u := pgtest.SchemaURL(t)
	raw := open(t, u) // migrated; its pool reads and writes as the owner
	storetest.SecretsAtRest(t, storetest.AtRest{
		Open: func(t *testing.T, key []byte) (store.Backend, error) {
			s, err := postgres.Open(context.Background(), u, postgres.Config{SecretsKey: key})
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Raw: func(t *testing.T) []string {
			rows, err := raw.Pool().Query(context.Background(), `SELECT value FROM tenant_secrets ORDER BY name`)
			if err != nil {
				t.Fatal(err)
			}
			out, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return out
		},
		PutPlain: func(t *testing.T, tenantID, name, value string) {
			if _, err := raw.Pool().Exec(context.Background(), `INSERT INTO tenant_secrets (tenant_id, name, id, hosts, env, value, created_at, updated_at)
				VALUES ($1, $2, 'plain0123456789abcdef012', '["x.test"]', '', $3, now(), now())`, tenantID, name, value); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestContextEnvAtRest reads the env column behind the store's back, as
// the schema's owner.
func TestContextEnvAtRest(t *testing.T) {
	u := pgtest.SchemaURL(t)
	raw := open(t, u)
	storetest.ContextEnvAtRest(t, func(t *testing.T, key []byte) (store.Backend, error) {
		s, err := postgres.Open(context.Background(), u, postgres.Config{SecretsKey: key})
		if err != nil {
			return nil, err
		}
		return s, nil
	}, func(t *testing.T, id string) string {
		var v string
		if err := raw.Pool().QueryRow(context.Background(), `SELECT env FROM execution_contexts WHERE id = $1`, id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}, func(t *testing.T, id, v string) {
		if _, err := raw.Pool().Exec(context.Background(), `UPDATE execution_contexts SET env = $1 WHERE id = $2`, v, id); err != nil {
			t.Fatal(err)
		}
	})
}

func open(t testing.TB, u string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), u, postgres.Config{SecretsKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	baseURL(t)
	storetest.Run(t, func(t *testing.T) store.Backend { return open(t, pgtest.SchemaURL(t)) })
}

func TestOpenURL(t *testing.T) {
	u := pgtest.SchemaURL(t)
	b, err := store.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, ok := b.(*postgres.Store); !ok {
		t.Fatalf("store.Open(%q) = %T, want *postgres.Store", u, b)
	}
}

// TestConcurrentMigrate opens two stores on one empty schema at once: the
// advisory lock lets one migrate and the other find the work done.
func TestConcurrentMigrate(t *testing.T) {
	u := pgtest.SchemaURL(t)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	stores := make([]*postgres.Store, 3)
	for i := range stores {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(context.Background(), u, postgres.Config{})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var n int
	if err := stores[0].Pool().QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || n != len(files) || n < 1 {
		t.Fatalf("schema_migrations has %d rows for %d migrations (%v): each migration must apply once", n, len(files), err)
	}
}

// TestTwoDaemons stands in for two managers sharing one database: two
// separate pools race to create one identity and to terminate one context.
func TestTwoDaemons(t *testing.T) {
	u := pgtest.SchemaURL(t)
	a, b := open(t, u), open(t, u)
	daemons := []*postgres.Store{a, b}
	ctx := context.Background()
	id := contexts.Identity{TenantID: "t", ConversationID: "race", PathID: "main"}

	const n = 50
	var (
		wg         sync.WaitGroup
		wins, dups atomic.Int32
		errs       = make(chan error, 2*n)
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(s *postgres.Store) {
			defer wg.Done()
			<-start
			err := s.Create(ctx, &contexts.Record{Identity: id, ExpiresAt: time.Now()})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, errdefs.ErrAlreadyExists):
				dups.Add(1)
			default:
				errs <- err
			}
		}(daemons[i%2])
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || dups.Load() != n-1 {
		t.Fatalf("create race across two pools: %d won, %d already_exists; want 1 and %d", wins.Load(), dups.Load(), n-1)
	}

	// Both daemons' cleanup loops see the same expired record; exactly one
	// Terminate succeeds, so exactly one tears the sandbox down.
	expired, err := b.ListExpired(ctx, time.Now().Add(time.Second), 10)
	if err != nil || len(expired) != 1 {
		t.Fatalf("ListExpired = %d records, %v", len(expired), err)
	}
	var cleaned atomic.Int32
	start = make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(s *postgres.Store) {
			defer wg.Done()
			<-start
			ok, err := s.Terminate(ctx, expired[0].ID, contexts.ReasonExpired, time.Now(), "")
			if err != nil {
				errs <- err
			}
			if ok {
				cleaned.Add(1)
			}
		}(daemons[i%2])
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if cleaned.Load() != 1 {
		t.Fatalf("terminate race across two pools: %d callers got true, want 1", cleaned.Load())
	}
}

// TestRLSNonOwner connects as a role that is neither the owner nor
// BYPASSRLS and shows that the policy alone confines it: tenant A's
// setting never sees tenant B's rows, and no setting sees nothing.
func TestRLSNonOwner(t *testing.T) {
	ctx := context.Background()
	u := pgtest.SchemaURL(t)
	s := open(t, u)
	for _, tn := range []string{"A", "B"} {
		for _, p := range []string{"main", "branch"} {
			if err := s.Create(ctx, &contexts.Record{Identity: contexts.Identity{TenantID: tn, ConversationID: "c", PathID: p}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AppendAudit(ctx, store.AuditEvent{TenantID: tn, Kind: "context.created"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendAudit(ctx, store.AuditEvent{Kind: "system.started"}); err != nil {
		t.Fatal(err)
	}

	// A login role with plain grants and no BYPASSRLS.
	pu, _ := url.Parse(u)
	schema := pu.Query().Get("search_path")
	role := "sandlot_rls_" + strings(uuid.NewString())
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'rls' NOSUPERUSER NOBYPASSRLS", role),
		fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", schema, role),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s.execution_contexts, %s.audit_events TO %s", schema, schema, role),
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{
			fmt.Sprintf("REVOKE ALL ON %s.execution_contexts, %s.audit_events FROM %s", schema, schema, role),
			fmt.Sprintf("REVOKE ALL ON SCHEMA %s FROM %s", schema, role),
			"DROP ROLE " + role,
		} {
			if _, err := s.Pool().Exec(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	pu.User = url.UserPassword(role, "rls")
	conn, err := pgx.Connect(ctx, pu.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	visible := func(setting *string) (ctxTenants, auditTenants []string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if setting != nil {
			if _, err := tx.Exec(ctx, `SELECT set_config('app.tenant_id', $1, true)`, *setting); err != nil {
				t.Fatal(err)
			}
		}
		col := func(q string) []string {
			rows, err := tx.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			out, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		return col(`SELECT tenant_id FROM execution_contexts ORDER BY tenant_id`),
			col(`SELECT tenant_id FROM audit_events ORDER BY tenant_id`)
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name      string
		setting   *string
		ctxs, aud []string
	}{
		{"no setting", nil, nil, nil},
		{"empty setting", str(""), nil, nil},
		{"tenant A", str("A"), []string{"A", "A"}, []string{"A"}},
		{"tenant B", str("B"), []string{"B", "B"}, []string{"B"}},
		{"unknown tenant", str("C"), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, a := visible(tc.setting)
			if fmt.Sprint(c) != fmt.Sprint(tc.ctxs) || fmt.Sprint(a) != fmt.Sprint(tc.aud) {
				t.Fatalf("visible contexts %q, audit %q; want %q and %q", c, a, tc.ctxs, tc.aud)
			}
		})
	}
	// The setting from a committed transaction does not linger.
	if c, a := visible(nil); len(c)+len(a) != 0 {
		t.Fatalf("after scoped transactions, an unscoped one sees %q %q", c, a)
	}

	// Writes are confined too: A can neither insert B's row nor touch B's rows.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.Exec(ctx, `SELECT set_config('app.tenant_id', 'A', true)`)
	_, err = tx.Exec(ctx, `INSERT INTO execution_contexts (id, tenant_id, conversation_id, path_id, state, created_at, last_used_at, expires_at)
		VALUES ($1, 'B', 'x', 'main', 'creating', now(), now(), now())`, uuid.NewString())
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" {
		t.Fatalf("insert of B's row under A's setting: err = %v, want SQLSTATE 42501", err)
	}
	tx.Rollback(ctx)
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.Exec(ctx, `SELECT set_config('app.tenant_id', 'A', true)`)
	tag, err := tx.Exec(ctx, `UPDATE execution_contexts SET state = 'terminated' WHERE tenant_id = 'B'`)
	if err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("update of B's rows under A's setting: %v rows, %v; want 0", tag.RowsAffected(), err)
	}
	tx.Rollback(ctx)
}

// TestScopedStatementsRunAsAppRole checks the store's own tenant path: a
// tenant-scoped call runs as sandlot_app (so RLS applies even though the
// daemon connects as the owner) and the role does not outlive the call.
func TestScopedStatementsRunAsAppRole(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.SchemaURL(t))
	b := &contexts.Record{Identity: contexts.Identity{TenantID: "B", ConversationID: "c", PathID: "main"}}
	if err := s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	// The only thing between tenant A and B's row is the policy: the
	// statement itself has no tenant condition.
	if _, err := s.Get(tenant.WithID(ctx, "A"), b.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Get of B's record scoped to A: %v, want not_found", err)
	}
	if _, err := s.Get(tenant.WithID(ctx, "B"), b.ID); err != nil {
		t.Fatalf("Get of B's record scoped to B: %v", err)
	}
	// Pooled connections come back as the owner with no tenant.
	for i := 0; i < 4; i++ {
		var role, setting string
		if err := s.Pool().QueryRow(ctx, `SELECT current_user, COALESCE(current_setting('app.tenant_id', true), '')`).Scan(&role, &setting); err != nil {
			t.Fatal(err)
		}
		if role == postgres.AppRole || setting != "" {
			t.Fatalf("pooled connection left as %s with app.tenant_id=%q", role, setting)
		}
	}
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Backend {
		s, err := postgres.Open(context.Background(), pgtest.SchemaURL(b), postgres.Config{})
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
