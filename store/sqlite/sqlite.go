// Package sqlite is the default store: SQLite through modernc.org/sqlite
// (pure Go, so the daemon stays cgo-free). The database runs in WAL mode
// with a busy timeout and foreign keys on. All writes go through one
// connection, so writers in this process queue in Go instead of fighting
// for SQLite's lock; reads use a separate small pool that WAL lets run
// next to the writer. Embedded migrations (migrations/NNNN_*.sql) are
// applied at Open in one immediate transaction.
//
// SQLite has no row-level security: tenant scoping from ctx is applied as a
// tenant_id condition on every context and audit statement.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/tenant"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Config tunes the store. The zero value is the default.
type Config struct {
	// BusyTimeout is how long a statement waits for another process's
	// lock. 0 means 5 s.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool. 0 means 4.
	ReadConns int
}

// Store is a SQLite-backed store, safe for concurrent use.
type Store struct {
	w, r *sql.DB // w: the one writer connection; r: readers (query_only)

	getStmt, getActiveStmt, recordStmt, touchStmt, terminateStmt, keyStmt *sql.Stmt
}

var (
	_ contexts.Store = (*Store)(nil)
	_ tenant.Store   = (*Store)(nil)
)

// Open opens the database file at path, creating it (mode 0600) and its
// directory when missing, and migrates it to the current schema.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("sqlite: a database file path is required: %w", errdefs.ErrInvalidArgument)
	}
	// The file holds key hashes: create it (and its directory) private.
	// SQLite gives the -wal and -shm files the database file's mode.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	f.Close()
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = 5 * time.Second
	}
	if cfg.ReadConns == 0 {
		cfg.ReadConns = 4
	}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(cfg.BusyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", "NORMAL") // durable across process crashes; WAL keeps it consistent
	w, err := sql.Open("sqlite", path+"?"+q.Encode()+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{w: w}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	q.Del("_journal_mode") // set once by the writer; persistent in the file
	q.Set("_query_only", "1")
	r, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(cfg.ReadConns)
	r.SetMaxIdleConns(cfg.ReadConns)
	r.SetConnMaxIdleTime(0)
	s.r = r
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	return s, nil
}

// Version reports the schema version the database is at.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.w.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	// BEGIN IMMEDIATE (via _txlock): a second process migrating at the same
	// time waits for this one and then finds nothing left to do.
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("read schema version: %w", err)
		}
		applied[v] = true
	}
	rows.Close()
	if err := migrate.Known(ms, applied); err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("record migration %s: %w", m.Name, err)
		}
	}
	return tx.Commit()
}

const recordCols = `id, tenant_id, conversation_id, path_id, state, reason, sandbox_id, provider, template,
	created_at, last_used_at, expires_at, terminated_at, execution_count, total_execution_time_ms,
	last_error, resource_usage, metadata, node`

// scopeCond restricts a statement to the tenant in ctx; its two arguments
// come from scope(ctx).
const scopeCond = ` AND (?1 = '' OR tenant_id = ?1)`

func scope(ctx context.Context) string {
	id, _ := tenant.FromContext(ctx)
	return id
}

func (s *Store) prepare(ctx context.Context) error {
	var err error
	prep := func(db *sql.DB, q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = db.PrepareContext(ctx, q)
		return st
	}
	s.getStmt = prep(s.r, `SELECT `+recordCols+` FROM execution_contexts WHERE id = ?2`+scopeCond)
	s.getActiveStmt = prep(s.r, `SELECT `+recordCols+` FROM execution_contexts
		WHERE tenant_id = ?2 AND conversation_id = ?3 AND path_id = ?4 AND state IN ('creating', 'ready')`+scopeCond)
	s.recordStmt = prep(s.w, `UPDATE execution_contexts SET execution_count = execution_count + 1,
		total_execution_time_ms = total_execution_time_ms + ?3, last_used_at = ?4, expires_at = ?5, updated_at = ?6
		WHERE id = ?2 AND state IN ('creating', 'ready')`+scopeCond+` RETURNING `+recordCols)
	s.touchStmt = prep(s.w, `UPDATE execution_contexts SET last_used_at = ?3, expires_at = ?4, updated_at = ?5
		WHERE id = ?2 AND state IN ('creating', 'ready')`+scopeCond)
	s.terminateStmt = prep(s.w, `UPDATE execution_contexts SET state = ?3, reason = ?4, terminated_at = ?5,
		last_error = CASE WHEN ?6 = '' THEN last_error ELSE ?6 END, updated_at = ?7
		WHERE id = ?2 AND state IN ('creating', 'ready')`+scopeCond)
	s.keyStmt = prep(s.r, `SELECT t.id, t.name, t.guard_mode, t.admin, t.created_at, t.key_prefix, t.key_generation
		FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.hash = ?`)
	return err
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

func nowMs() int64 { return time.Now().UnixMilli() }

type scanner interface{ Scan(dest ...any) error }

func scanRecord(sc scanner) (*contexts.Record, error) {
	var (
		r                        contexts.Record
		created, used, expires   int64
		terminated               sql.NullInt64
		usage, meta, state, reas string
	)
	err := sc.Scan(&r.ID, &r.TenantID, &r.ConversationID, &r.PathID, &state, &reas, &r.SandboxID, &r.Provider,
		&r.Template, &created, &used, &expires, &terminated, &r.ExecutionCount, &r.TotalExecutionTimeMs,
		&r.LastError, &usage, &meta, &r.Node)
	if err != nil {
		return nil, err
	}
	r.State, r.Reason = contexts.State(state), contexts.Reason(reas)
	r.CreatedAt, r.LastUsedAt, r.ExpiresAt = fromMs(created), fromMs(used), fromMs(expires)
	if terminated.Valid {
		t := fromMs(terminated.Int64)
		r.TerminatedAt = &t
	}
	if err := json.Unmarshal([]byte(usage), &r.ResourceUsage); err != nil {
		return nil, fmt.Errorf("context %s: resource_usage: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(meta), &r.Metadata); err != nil {
		return nil, fmt.Errorf("context %s: metadata: %w", r.ID, err)
	}
	if len(r.Metadata) == 0 {
		r.Metadata = nil
	}
	return &r, nil
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of strings and plain structs reach here.
		panic(err)
	}
	return string(b)
}

func metaText(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	return jsonText(m)
}

func termMs(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ms(*t)
}

func isUnique(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

func notFound(id string) error { return fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound) }

// Create implements contexts.Store.
func (s *Store) Create(ctx context.Context, rec *contexts.Record) error {
	if err := rules.PrepareCreate(ctx, rec, time.Now()); err != nil {
		return err
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO execution_contexts (`+recordCols+`, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		rec.ID, rec.TenantID, rec.ConversationID, rec.PathID, string(rec.State), string(rec.Reason), rec.SandboxID,
		rec.Provider, rec.Template, ms(rec.CreatedAt), ms(rec.LastUsedAt), ms(rec.ExpiresAt), termMs(rec.TerminatedAt),
		rec.ExecutionCount, rec.TotalExecutionTimeMs, rec.LastError, jsonText(rec.ResourceUsage), metaText(rec.Metadata),
		rec.Node, nowMs())
	if isUnique(err) {
		return fmt.Errorf("context %s for %s/%s/%s: %w", rec.ID, rec.TenantID, rec.ConversationID, rec.PathID, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("create context %s: %w", rec.ID, err)
	}
	return nil
}

// Get implements contexts.Store.
func (s *Store) Get(ctx context.Context, id string) (*contexts.Record, error) {
	r, err := scanRecord(s.getStmt.QueryRowContext(ctx, scope(ctx), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get context %s: %w", id, err)
	}
	return r, nil
}

// GetActive implements contexts.Store.
func (s *Store) GetActive(ctx context.Context, id contexts.Identity) (*contexts.Record, error) {
	r, err := scanRecord(s.getActiveStmt.QueryRowContext(ctx, scope(ctx), id.TenantID, id.ConversationID, id.PathID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("active context of %s/%s/%s: %w", id.TenantID, id.ConversationID, id.PathID, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get active context: %w", err)
	}
	return r, nil
}

// Update implements contexts.Store.
func (s *Store) Update(ctx context.Context, rec *contexts.Record) error {
	if err := rules.CheckUpdate(rec.ID, contexts.StateReady, rec.State); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE execution_contexts SET state = ?3, reason = ?4, sandbox_id = ?5,
		provider = ?6, template = ?7, last_used_at = ?8, expires_at = ?9, terminated_at = ?10,
		execution_count = ?11, total_execution_time_ms = ?12, last_error = ?13, resource_usage = ?14,
		metadata = ?15, updated_at = ?16
		WHERE id = ?2 AND (state IN ('creating', 'ready') OR state = ?3)`+scopeCond,
		scope(ctx), rec.ID, string(rec.State), string(rec.Reason), rec.SandboxID, rec.Provider, rec.Template,
		ms(rules.Time(rec.LastUsedAt)), ms(rules.Time(rec.ExpiresAt)), termMs(rec.TerminatedAt),
		rec.ExecutionCount, rec.TotalExecutionTimeMs, rec.LastError, jsonText(rec.ResourceUsage),
		metaText(rec.Metadata), nowMs())
	if err != nil {
		return fmt.Errorf("update context %s: %w", rec.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		cur, err := s.Get(ctx, rec.ID)
		if err != nil {
			return err
		}
		return rules.CheckUpdate(rec.ID, cur.State, rec.State)
	}
	return nil
}

// RecordExecution implements contexts.Store.
func (s *Store) RecordExecution(ctx context.Context, id string, dur time.Duration, now, expiresAt time.Time) (*contexts.Record, error) {
	r, err := scanRecord(s.recordStmt.QueryRowContext(ctx, scope(ctx), id, dur.Milliseconds(), ms(now), ms(expiresAt), nowMs()))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.WhyNot(ctx, s.Get, id)
	}
	if err != nil {
		return nil, fmt.Errorf("record execution on %s: %w", id, err)
	}
	return r, nil
}

// Touch implements contexts.Store.
func (s *Store) Touch(ctx context.Context, id string, now, expiresAt time.Time) error {
	res, err := s.touchStmt.ExecContext(ctx, scope(ctx), id, ms(now), ms(expiresAt), nowMs())
	if err != nil {
		return fmt.Errorf("touch %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return rules.WhyNot(ctx, s.Get, id)
	}
	return nil
}

// Terminate implements contexts.Store. The conditional UPDATE makes it a
// compare-and-set: exactly one caller sees a row change.
func (s *Store) Terminate(ctx context.Context, id string, reason contexts.Reason, at time.Time, lastErr string) (bool, error) {
	res, err := s.terminateStmt.ExecContext(ctx, scope(ctx), id, string(rules.FinalState(reason)), string(reason),
		ms(at), lastErr, nowMs())
	if err != nil {
		return false, fmt.Errorf("terminate %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	if _, err := s.Get(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}

func (s *Store) queryRecords(ctx context.Context, q string, args ...any) ([]*contexts.Record, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
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

// ListExpired implements contexts.Store: soonest expiry first, at most
// limit records (limit <= 0: all).
func (s *Store) ListExpired(ctx context.Context, cutoff time.Time, limit int) ([]*contexts.Record, error) {
	if limit <= 0 {
		limit = -1
	}
	out, err := s.queryRecords(ctx, `SELECT `+recordCols+` FROM execution_contexts
		WHERE state IN ('creating', 'ready') AND expires_at <= ?2`+scopeCond+`
		ORDER BY expires_at, id LIMIT ?3`, scope(ctx), ms(cutoff), limit)
	if err != nil {
		return nil, fmt.Errorf("list expired: %w", err)
	}
	return out, nil
}

// ListActive implements contexts.Store, ordered by creation time.
func (s *Store) ListActive(ctx context.Context) ([]*contexts.Record, error) {
	out, err := s.queryRecords(ctx, `SELECT `+recordCols+` FROM execution_contexts
		WHERE state IN ('creating', 'ready')`+scopeCond+` ORDER BY created_at, id`, scope(ctx))
	if err != nil {
		return nil, fmt.Errorf("list active: %w", err)
	}
	return out, nil
}

// CountActive implements contexts.Store.
func (s *Store) CountActive(ctx context.Context, tenantID, conversationID string) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM execution_contexts
		WHERE tenant_id = ?2 AND (?3 = '' OR conversation_id = ?3) AND state IN ('creating', 'ready')`+scopeCond,
		scope(ctx), tenantID, conversationID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count active: %w", err)
	}
	return n, nil
}

// List implements contexts.Store.
func (s *Store) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	var b strings.Builder
	args := []any{scope(ctx)}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("?%d", len(args))
	}
	b.WriteString(`SELECT ` + recordCols + ` FROM execution_contexts WHERE 1 = 1` + scopeCond)
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
		ph := make([]string, len(f.States))
		for i, st := range f.States {
			ph[i] = arg(string(st))
		}
		b.WriteString(" AND state IN (" + strings.Join(ph, ", ") + ")")
	}
	for k, v := range f.Metadata {
		b.WriteString(" AND EXISTS (SELECT 1 FROM json_each(metadata) WHERE key = " + arg(k) + " AND value = " + arg(v) + ")")
	}
	if f.After != "" {
		b.WriteString(" AND id > " + arg(f.After))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = rules.DefaultListLimit
	}
	b.WriteString(" ORDER BY id LIMIT " + arg(limit))
	out, err := s.queryRecords(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list contexts: %w", err)
	}
	return out, nil
}

// Close implements contexts.Store.
func (s *Store) Close() error {
	for _, st := range []*sql.Stmt{s.getStmt, s.getActiveStmt, s.recordStmt, s.touchStmt, s.terminateStmt, s.keyStmt} {
		if st != nil {
			st.Close()
		}
	}
	var err error
	if s.r != nil {
		err = s.r.Close()
	}
	return errors.Join(err, s.w.Close())
}

const tenantCols = `id, name, guard_mode, admin, created_at, key_prefix, key_generation`

func scanTenant(sc scanner) (*tenant.Tenant, error) {
	var (
		t       tenant.Tenant
		created int64
	)
	if err := sc.Scan(&t.ID, &t.Name, &t.GuardMode, &t.Admin, &created, &t.KeyPrefix, &t.KeyGeneration); err != nil {
		return nil, err
	}
	t.CreatedAt = fromMs(created)
	return &t, nil
}

// CreateTenant implements tenant.Store. It fills t.ID (when empty),
// t.GuardMode (enforce), t.CreatedAt and t.KeyGeneration (1).
func (s *Store) CreateTenant(ctx context.Context, t *tenant.Tenant, keyHash string) error {
	if err := rules.PrepareTenant(t, time.Now()); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create tenant: %w", err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `INSERT INTO tenants (`+tenantCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Name, t.GuardMode, t.Admin, ms(t.CreatedAt), t.KeyPrefix, t.KeyGeneration)
	if isUnique(err) {
		return fmt.Errorf("tenant %s: %w", t.ID, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("create tenant %s: %w", t.ID, err)
	}
	if keyHash != "" {
		_, err = tx.ExecContext(ctx, `INSERT INTO api_keys (hash, tenant_id, created_at) VALUES (?, ?, ?)`, keyHash, t.ID, nowMs())
		if isUnique(err) {
			return fmt.Errorf("tenant %s: key hash in use: %w", t.ID, errdefs.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("create tenant %s: key: %w", t.ID, err)
		}
	}
	return tx.Commit()
}

// TenantByKeyHash implements tenant.Store.
func (s *Store) TenantByKeyHash(ctx context.Context, keyHash string) (*tenant.Tenant, error) {
	t, err := scanTenant(s.keyStmt.QueryRowContext(ctx, keyHash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("key: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tenant by key: %w", err)
	}
	return t, nil
}

// GetTenant implements tenant.Store.
func (s *Store) GetTenant(ctx context.Context, id string) (*tenant.Tenant, error) {
	t, err := scanTenant(s.r.QueryRowContext(ctx, `SELECT `+tenantCols+` FROM tenants WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get tenant %s: %w", id, err)
	}
	return t, nil
}

// ListTenants implements tenant.Store, ordered by creation time.
func (s *Store) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+tenantCols+` FROM tenants ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	defer rows.Close()
	var out []*tenant.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, fmt.Errorf("list tenants: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetKey implements tenant.Store.
func (s *Store) SetKey(ctx context.Context, id, keyHash, keyPrefix string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("set key: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE tenants SET key_prefix = ?, key_generation = key_generation + 1 WHERE id = ?`, keyPrefix, id)
	if err != nil {
		return fmt.Errorf("set key of %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM api_keys WHERE tenant_id = ?`, id); err != nil {
		return fmt.Errorf("set key of %s: %w", id, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO api_keys (hash, tenant_id, created_at) VALUES (?, ?, ?)`, keyHash, id, nowMs())
	if isUnique(err) {
		return fmt.Errorf("tenant %s: key hash in use: %w", id, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("set key of %s: %w", id, err)
	}
	return tx.Commit()
}

// UpdateTenant implements tenant.Store: it saves Name, GuardMode and Admin.
func (s *Store) UpdateTenant(ctx context.Context, t *tenant.Tenant) error {
	if err := rules.CheckGuardMode(t.GuardMode); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE tenants SET name = ?, guard_mode = ?, admin = ? WHERE id = ?`,
		t.Name, t.GuardMode, t.Admin, t.ID)
	if err != nil {
		return fmt.Errorf("update tenant %s: %w", t.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("tenant %s: %w", t.ID, errdefs.ErrNotFound)
	}
	return nil
}

// DeleteTenant implements tenant.Store. Its key goes with it (cascade); its
// contexts and audit events stay.
func (s *Store) DeleteTenant(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM tenants WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete tenant %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// AppendAudit adds ev to the trail.
func (s *Store) AppendAudit(ctx context.Context, ev audit.Event) error {
	if err := rules.PrepareAudit(ctx, &ev, time.Now()); err != nil {
		return err
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO audit_events (tenant_id, context_id, kind, detail, at) VALUES (?, ?, ?, ?, ?)`,
		ev.TenantID, ev.ContextID, ev.Kind, metaText(ev.Detail), ms(ev.At))
	if err != nil {
		return fmt.Errorf("append audit %s: %w", ev.Kind, err)
	}
	return nil
}

// ListAudit returns the newest events first, of tenantID or of all tenants
// when it is empty; limit <= 0 means 100.
func (s *Store) ListAudit(ctx context.Context, tenantID string, limit int) ([]audit.Event, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, tenant_id, context_id, kind, detail, at FROM audit_events
		WHERE (?2 = '' OR tenant_id = ?2)`+scopeCond+` ORDER BY id DESC LIMIT ?3`,
		scope(ctx), tenantID, rules.AuditLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []audit.Event
	for rows.Next() {
		var (
			ev     audit.Event
			detail string
			at     int64
		)
		if err := rows.Scan(&ev.ID, &ev.TenantID, &ev.ContextID, &ev.Kind, &detail, &at); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		if err := json.Unmarshal([]byte(detail), &ev.Detail); err != nil {
			return nil, fmt.Errorf("audit %d: detail: %w", ev.ID, err)
		}
		if len(ev.Detail) == 0 {
			ev.Detail = nil
		}
		ev.At = fromMs(at)
		out = append(out, ev)
	}
	return out, rows.Err()
}
