// Package postgres is the store for shared and multi-daemon deployments,
// on github.com/jackc/pgx/v5.
//
// Roles: the daemon connects as the schema owner, which applies the
// embedded migrations at Open (under an advisory lock) and does system work
// (cleanup, reconcile, tenant admin) with row-level security not applying
// to it (RLS is enabled, not forced). When ctx carries a tenant
// (tenant.FromContext), the statement runs in a transaction that first
// switches to the NOLOGIN role sandlot_app and sets app.tenant_id, so the
// database itself confines it to that tenant's rows. docs/stores.md has the
// full argument, including why two daemons never double-create or
// double-clean.
package postgres

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/tenant"
)

//go:embed migrations/*.sql
var migrations embed.FS

// AppRole is the role tenant-scoped statements run as. The first migration
// creates it (NOLOGIN, no BYPASSRLS) and grants it to the owner.
const AppRole = "sandlot_app"

// migrationLock is the advisory lock key held while migrating, so daemons
// starting together apply each migration once.
const migrationLock int64 = 0x73616e646c6f74 // "sandlot"

// Config tunes the store. The zero value is the default.
type Config struct {
	// MaxConns caps the pool. 0 means pgxpool's default (max(4, NumCPU)).
	MaxConns int32
}

// Store is a Postgres-backed store, safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

var (
	_ contexts.Store = (*Store)(nil)
	_ tenant.Store   = (*Store)(nil)
)

// Open connects to url (a postgres:// URL; search_path and other runtime
// parameters may ride along as query parameters) and migrates the schema.
func Open(ctx context.Context, url string, cfg Config) (*Store, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: %w", errdefs.ErrUnavailable, err)
	}
	s := &Store{pool: pool}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return s, nil
}

// Pool exposes the connection pool (for tests and admin tooling).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Version reports the schema version the database is at.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	applied := map[int]bool{}
	for _, v := range versions {
		applied[v] = true
	}
	if err := migrate.Known(ms, applied); err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// querier is what a statement runs on: the pool (system work) or a
// tenant-scoped transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// run runs fn on the pool, or, when ctx carries a tenant, on a querier
// that sends each statement in one pipeline behind
//
//	SELECT set_config('role', 'sandlot_app', true), set_config('app.tenant_id', $tenant, true)
//
// so row-level security confines it to that tenant. A pipeline up to its
// Sync is one implicit transaction: both settings are transaction-local,
// vanish at its end, and a pooled connection never leaks a tenant. It costs
// one round trip, where BEGIN/SET/statement/COMMIT would cost four. fn must
// run exactly one statement per querier call (every caller here does).
func (s *Store) run(ctx context.Context, fn func(q querier) error) error {
	id, ok := tenant.FromContext(ctx)
	if !ok {
		return fn(s.pool)
	}
	return fn(scoped{pool: s.pool, tenant: id})
}

const setScope = `SELECT set_config('role', $1, true), set_config('app.tenant_id', $2, true)`

// scoped is a querier whose every statement runs as AppRole for one tenant.
type scoped struct {
	pool   *pgxpool.Pool
	tenant string
}

// send pipelines the scope and the statement; the caller has read the
// scope's result when send returns without error, and must close br.
func (q scoped) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.Queue(setScope, AppRole, q.tenant)
	b.Queue(sql, args...)
	br := q.pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, fmt.Errorf("scope to tenant: %w", err)
	}
	return br, nil
}

func (q scoped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := q.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

func (q scoped) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := q.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (q scoped) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := q.send(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// batchRows closes the pipeline when the rows end, and reports the
// pipeline's own error (its implicit commit) through Err.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.err = r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	cerr := r.br.Close()
	if err != nil {
		return err
	}
	return cerr
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

const recordCols = `id::text, tenant_id, conversation_id, path_id, state, reason, sandbox_id, provider, template,
	created_at, last_used_at, expires_at, terminated_at, execution_count, total_execution_time_ms,
	last_error, resource_usage, metadata, node`

func scanRecord(row pgx.Row) (*contexts.Record, error) {
	var (
		r                      contexts.Record
		terminated             *time.Time
		usage, meta            []byte
		state, reason          string
		created, used, expires time.Time
	)
	err := row.Scan(&r.ID, &r.TenantID, &r.ConversationID, &r.PathID, &state, &reason, &r.SandboxID, &r.Provider,
		&r.Template, &created, &used, &expires, &terminated, &r.ExecutionCount, &r.TotalExecutionTimeMs,
		&r.LastError, &usage, &meta, &r.Node)
	if err != nil {
		return nil, err
	}
	r.State, r.Reason = contexts.State(state), contexts.Reason(reason)
	r.CreatedAt, r.LastUsedAt, r.ExpiresAt = created.UTC(), used.UTC(), expires.UTC()
	if terminated != nil {
		t := terminated.UTC()
		r.TerminatedAt = &t
	}
	if err := json.Unmarshal(usage, &r.ResourceUsage); err != nil {
		return nil, fmt.Errorf("context %s: resource_usage: %w", r.ID, err)
	}
	if err := json.Unmarshal(meta, &r.Metadata); err != nil {
		return nil, fmt.Errorf("context %s: metadata: %w", r.ID, err)
	}
	if len(r.Metadata) == 0 {
		r.Metadata = nil
	}
	return &r, nil
}

func collectRecords(rows pgx.Rows, err error) ([]*contexts.Record, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*contexts.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only string maps and plain structs reach here
	}
	return string(b)
}

func mapText(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	return jsonText(m)
}

func tp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := rules.Time(*t)
	return &v
}

// pgCode returns the SQLSTATE of err, if it is a Postgres error.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// mapErr turns constraint and privilege failures into categories.
func mapErr(err error, what string) error {
	switch pgCode(err) {
	case "":
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w", what, err)
		}
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) {
			return fmt.Errorf("%s: %w: %w", what, errdefs.ErrUnavailable, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	case "23505":
		return fmt.Errorf("%s: %w", what, errdefs.ErrAlreadyExists)
	case "42501":
		return fmt.Errorf("%s: %w", what, errdefs.ErrPermissionDenied)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func notFound(id string) error { return fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound) }

// validID reports whether id can name a row; anything else is simply not found.
func validID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil
}

// Create implements contexts.Store.
func (s *Store) Create(ctx context.Context, rec *contexts.Record) error {
	if err := rules.PrepareCreate(ctx, rec, time.Now()); err != nil {
		return err
	}
	err := s.run(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `INSERT INTO execution_contexts (`+strings.ReplaceAll(recordCols, "id::text", "id")+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17::jsonb, $18::jsonb, $19)`,
			rec.ID, rec.TenantID, rec.ConversationID, rec.PathID, string(rec.State), string(rec.Reason), rec.SandboxID,
			rec.Provider, rec.Template, rec.CreatedAt, rec.LastUsedAt, rec.ExpiresAt, rec.TerminatedAt,
			rec.ExecutionCount, rec.TotalExecutionTimeMs, rec.LastError, jsonText(rec.ResourceUsage), mapText(rec.Metadata), rec.Node)
		return err
	})
	if err != nil {
		return mapErr(err, fmt.Sprintf("create context %s for %s/%s/%s", rec.ID, rec.TenantID, rec.ConversationID, rec.PathID))
	}
	return nil
}

// Get implements contexts.Store.
func (s *Store) Get(ctx context.Context, id string) (*contexts.Record, error) {
	if !validID(id) {
		return nil, notFound(id)
	}
	var r *contexts.Record
	err := s.run(ctx, func(q querier) error {
		var err error
		r, err = scanRecord(q.QueryRow(ctx, `SELECT `+recordCols+` FROM execution_contexts WHERE id = $1`, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, mapErr(err, "get context "+id)
	}
	return r, nil
}

// GetActive implements contexts.Store.
func (s *Store) GetActive(ctx context.Context, id contexts.Identity) (*contexts.Record, error) {
	var r *contexts.Record
	err := s.run(ctx, func(q querier) error {
		var err error
		r, err = scanRecord(q.QueryRow(ctx, `SELECT `+recordCols+` FROM execution_contexts
			WHERE tenant_id = $1 AND conversation_id = $2 AND path_id = $3 AND state IN ('creating', 'ready')`,
			id.TenantID, id.ConversationID, id.PathID))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("active context of %s/%s/%s: %w", id.TenantID, id.ConversationID, id.PathID, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr(err, "get active context")
	}
	return r, nil
}

// Update implements contexts.Store. The state guard is in the WHERE
// clause, so a concurrent Terminate cannot be undone by a stale Update.
func (s *Store) Update(ctx context.Context, rec *contexts.Record) error {
	if err := rules.CheckUpdate(rec.ID, contexts.StateReady, rec.State); err != nil {
		return err
	}
	if !validID(rec.ID) {
		return notFound(rec.ID)
	}
	var n int64
	err := s.run(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, `UPDATE execution_contexts SET state = $2, reason = $3, sandbox_id = $4,
			provider = $5, template = $6, last_used_at = $7, expires_at = $8, terminated_at = $9,
			execution_count = $10, total_execution_time_ms = $11, last_error = $12, resource_usage = $13::jsonb,
			metadata = $14::jsonb
			WHERE id = $1 AND (state IN ('creating', 'ready') OR state = $2)`,
			rec.ID, string(rec.State), string(rec.Reason), rec.SandboxID, rec.Provider, rec.Template,
			rules.Time(rec.LastUsedAt), rules.Time(rec.ExpiresAt), tp(rec.TerminatedAt),
			rec.ExecutionCount, rec.TotalExecutionTimeMs, rec.LastError, jsonText(rec.ResourceUsage), mapText(rec.Metadata))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "update context "+rec.ID)
	}
	if n == 0 {
		cur, err := s.Get(ctx, rec.ID)
		if err != nil {
			return err
		}
		return rules.CheckUpdate(rec.ID, cur.State, rec.State)
	}
	return nil
}

// RecordExecution implements contexts.Store: one UPDATE ... RETURNING, so
// concurrent calls serialize on the row lock and none is lost.
func (s *Store) RecordExecution(ctx context.Context, id string, dur time.Duration, now, expiresAt time.Time) (*contexts.Record, error) {
	if !validID(id) {
		return nil, notFound(id)
	}
	var r *contexts.Record
	err := s.run(ctx, func(q querier) error {
		var err error
		r, err = scanRecord(q.QueryRow(ctx, `UPDATE execution_contexts SET execution_count = execution_count + 1,
			total_execution_time_ms = total_execution_time_ms + $2, last_used_at = $3, expires_at = $4
			WHERE id = $1 AND state IN ('creating', 'ready') RETURNING `+recordCols,
			id, dur.Milliseconds(), rules.Time(now), rules.Time(expiresAt)))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rules.WhyNot(ctx, s.Get, id)
	}
	if err != nil {
		return nil, mapErr(err, "record execution on "+id)
	}
	return r, nil
}

// Touch implements contexts.Store.
func (s *Store) Touch(ctx context.Context, id string, now, expiresAt time.Time) error {
	if !validID(id) {
		return notFound(id)
	}
	var n int64
	err := s.run(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, `UPDATE execution_contexts SET last_used_at = $2, expires_at = $3
			WHERE id = $1 AND state IN ('creating', 'ready')`, id, rules.Time(now), rules.Time(expiresAt))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "touch "+id)
	}
	if n == 0 {
		return rules.WhyNot(ctx, s.Get, id)
	}
	return nil
}

// Terminate implements contexts.Store. It is a compare-and-set on the
// state: a second caller blocks on the row lock, re-evaluates the WHERE
// clause against the committed row, finds it ended and changes nothing, so
// exactly one caller, on any daemon, gets true and owns the teardown.
func (s *Store) Terminate(ctx context.Context, id string, reason contexts.Reason, at time.Time, lastErr string) (bool, error) {
	if !validID(id) {
		return false, notFound(id)
	}
	var n int64
	err := s.run(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, `UPDATE execution_contexts SET state = $2, reason = $3, terminated_at = $4,
			last_error = CASE WHEN $5 = '' THEN last_error ELSE $5 END
			WHERE id = $1 AND state IN ('creating', 'ready')`,
			id, string(rules.FinalState(reason)), string(reason), rules.Time(at), lastErr)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return false, mapErr(err, "terminate "+id)
	}
	if n == 1 {
		return true, nil
	}
	if _, err := s.Get(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}

func (s *Store) list(ctx context.Context, what, sql string, args ...any) ([]*contexts.Record, error) {
	var out []*contexts.Record
	err := s.run(ctx, func(q querier) error {
		var err error
		out, err = collectRecords(q.Query(ctx, sql, args...))
		return err
	})
	if err != nil {
		return nil, mapErr(err, what)
	}
	return out, nil
}

// ListExpired implements contexts.Store: soonest expiry first, at most
// limit records (limit <= 0: all).
func (s *Store) ListExpired(ctx context.Context, cutoff time.Time, limit int) ([]*contexts.Record, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	return s.list(ctx, "list expired", `SELECT `+recordCols+` FROM execution_contexts
		WHERE state IN ('creating', 'ready') AND expires_at <= $1 ORDER BY expires_at, id LIMIT $2`,
		rules.Time(cutoff), lim)
}

// ListActive implements contexts.Store, ordered by creation time.
func (s *Store) ListActive(ctx context.Context) ([]*contexts.Record, error) {
	return s.list(ctx, "list active", `SELECT `+recordCols+` FROM execution_contexts
		WHERE state IN ('creating', 'ready') ORDER BY created_at, id`)
}

// CountActive implements contexts.Store.
func (s *Store) CountActive(ctx context.Context, tenantID, conversationID string) (int, error) {
	var n int
	err := s.run(ctx, func(q querier) error {
		return q.QueryRow(ctx, `SELECT COUNT(*) FROM execution_contexts
			WHERE tenant_id = $1 AND ($2 = '' OR conversation_id = $2) AND state IN ('creating', 'ready')`,
			tenantID, conversationID).Scan(&n)
	})
	if err != nil {
		return 0, mapErr(err, "count active")
	}
	return n, nil
}

// List implements contexts.Store.
func (s *Store) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	var b strings.Builder
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	b.WriteString(`SELECT ` + recordCols + ` FROM execution_contexts WHERE true`)
	if f.TenantID != "" {
		b.WriteString(" AND tenant_id = " + arg(f.TenantID))
	}
	if f.ConversationID != "" {
		b.WriteString(" AND conversation_id = " + arg(f.ConversationID))
	}
	if f.PathID != "" {
		b.WriteString(" AND path_id = " + arg(f.PathID))
	}
	if len(f.States) > 0 {
		st := make([]string, len(f.States))
		for i, v := range f.States {
			st[i] = string(v)
		}
		b.WriteString(" AND state = ANY(" + arg(st) + "::text[])")
	}
	if len(f.Metadata) > 0 {
		b.WriteString(" AND metadata @> " + arg(jsonText(f.Metadata)) + "::jsonb")
	}
	if f.After != "" {
		if validID(f.After) {
			b.WriteString(" AND id > " + arg(f.After) + "::uuid")
		} else {
			b.WriteString(" AND id::text > " + arg(f.After))
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = rules.DefaultListLimit
	}
	b.WriteString(" ORDER BY id LIMIT " + arg(limit))
	return s.list(ctx, "list contexts", b.String(), args...)
}

// Close implements contexts.Store.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

const tenantCols = `t.id, t.name, t.guard_mode, t.admin, t.created_at, t.key_prefix, t.key_generation`

func scanTenant(row pgx.Row) (*tenant.Tenant, error) {
	var t tenant.Tenant
	if err := row.Scan(&t.ID, &t.Name, &t.GuardMode, &t.Admin, &t.CreatedAt, &t.KeyPrefix, &t.KeyGeneration); err != nil {
		return nil, err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return &t, nil
}

// CreateTenant implements tenant.Store. It fills t.ID (when empty),
// t.GuardMode (enforce), t.CreatedAt and t.KeyGeneration (1). Tenant tables are system tables:
// they are never tenant-scoped.
func (s *Store) CreateTenant(ctx context.Context, t *tenant.Tenant, keyHash string) error {
	if err := rules.PrepareTenant(t, time.Now()); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO tenants (id, name, guard_mode, admin, created_at, key_prefix, key_generation)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, t.ID, t.Name, t.GuardMode, t.Admin, t.CreatedAt, t.KeyPrefix, t.KeyGeneration); err != nil {
			return err
		}
		if keyHash == "" {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO api_keys (hash, tenant_id) VALUES ($1, $2)`, keyHash, t.ID)
		return err
	})
	if err != nil {
		return mapErr(err, "create tenant "+t.ID)
	}
	return nil
}

// TenantByKeyHash implements tenant.Store.
func (s *Store) TenantByKeyHash(ctx context.Context, keyHash string) (*tenant.Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantCols+`
		FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.hash = $1`, keyHash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("key: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr(err, "tenant by key")
	}
	return t, nil
}

// GetTenant implements tenant.Store.
func (s *Store) GetTenant(ctx context.Context, id string) (*tenant.Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantCols+` FROM tenants t WHERE t.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr(err, "get tenant "+id)
	}
	return t, nil
}

// ListTenants implements tenant.Store, ordered by creation time.
func (s *Store) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tenantCols+` FROM tenants t ORDER BY t.created_at, t.id`)
	if err != nil {
		return nil, mapErr(err, "list tenants")
	}
	defer rows.Close()
	var out []*tenant.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, mapErr(err, "list tenants")
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetKey implements tenant.Store.
func (s *Store) SetKey(ctx context.Context, id, keyHash, keyPrefix string) error {
	errNoTenant := fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE tenants SET key_prefix = $2, key_generation = key_generation + 1 WHERE id = $1`, id, keyPrefix)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errNoTenant
		}
		if _, err := tx.Exec(ctx, `DELETE FROM api_keys WHERE tenant_id = $1`, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO api_keys (hash, tenant_id) VALUES ($1, $2)`, keyHash, id)
		return err
	})
	if errors.Is(err, errNoTenant) {
		return err
	}
	if err != nil {
		return mapErr(err, "set key of "+id)
	}
	return nil
}

// UpdateTenant implements tenant.Store: it saves Name, GuardMode and Admin.
func (s *Store) UpdateTenant(ctx context.Context, t *tenant.Tenant) error {
	if err := rules.CheckGuardMode(t.GuardMode); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET name = $2, guard_mode = $3, admin = $4 WHERE id = $1`,
		t.ID, t.Name, t.GuardMode, t.Admin)
	if err != nil {
		return mapErr(err, "update tenant "+t.ID)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenant %s: %w", t.ID, errdefs.ErrNotFound)
	}
	return nil
}

// DeleteTenant implements tenant.Store. Its key goes with it (cascade); its
// contexts and audit events stay.
func (s *Store) DeleteTenant(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, id)
	if err != nil {
		return mapErr(err, "delete tenant "+id)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// AppendAudit adds ev to the trail.
func (s *Store) AppendAudit(ctx context.Context, ev audit.Event) error {
	if err := rules.PrepareAudit(ctx, &ev, time.Now()); err != nil {
		return err
	}
	err := s.run(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `INSERT INTO audit_events (tenant_id, context_id, kind, detail, at)
			VALUES ($1, $2, $3, $4::jsonb, $5)`, ev.TenantID, ev.ContextID, ev.Kind, mapText(ev.Detail), ev.At)
		return err
	})
	if err != nil {
		return mapErr(err, "append audit "+ev.Kind)
	}
	return nil
}

// ListAudit returns the newest events first, of tenantID or of all tenants
// when it is empty; limit <= 0 means 100.
func (s *Store) ListAudit(ctx context.Context, tenantID string, limit int) ([]audit.Event, error) {
	var out []audit.Event
	err := s.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT id, tenant_id, context_id, kind, detail, at FROM audit_events
			WHERE ($1 = '' OR tenant_id = $1) ORDER BY id DESC LIMIT $2`, tenantID, rules.AuditLimit(limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				ev     audit.Event
				detail []byte
			)
			if err := rows.Scan(&ev.ID, &ev.TenantID, &ev.ContextID, &ev.Kind, &detail, &ev.At); err != nil {
				return err
			}
			if err := json.Unmarshal(detail, &ev.Detail); err != nil {
				return fmt.Errorf("audit %d: detail: %w", ev.ID, err)
			}
			if len(ev.Detail) == 0 {
				ev.Detail = nil
			}
			ev.At = ev.At.UTC()
			out = append(out, ev)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapErr(err, "list audit")
	}
	return out, nil
}
