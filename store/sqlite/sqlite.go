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
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/internal/seal"
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
	// SecretsKey encrypts the tenants' secret values at rest (AES-256-GCM,
	// seal.KeySize bytes); rows written before are sealed at Open. nil: the
	// store keeps no new secrets (PutSecret fails with failed_precondition).
	SecretsKey []byte
}

// Store is a SQLite-backed store, safe for concurrent use.
type Store struct {
	w, r *sql.DB // w: the one writer connection; r: readers (query_only)
	box  *seal.Box

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
	if cfg.SecretsKey != nil {
		if s.box, err = seal.New(cfg.SecretsKey); err == nil {
			err = s.sealSecrets(ctx)
		}
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("sqlite %s: %w", path, err)
		}
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
		if step := steps[m.Version]; step != nil {
			if err := step(ctx, tx); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("record migration %s: %w", m.Name, err)
		}
	}
	return tx.Commit()
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
		WHERE tenant_id = ?2 AND conversation_id = ?3 AND path_id = ?4 AND user_id = ?5 AND state IN ('creating', 'ready')`+scopeCond)
	s.recordStmt = prep(s.w, `UPDATE execution_contexts SET execution_count = execution_count + ?7,
		total_execution_time_ms = total_execution_time_ms + ?3, last_used_at = ?4, expires_at = ?5, updated_at = ?6
		WHERE id = ?2 AND state IN ('creating', 'ready')`+scopeCond+` RETURNING `+recordCols)
	s.touchStmt = prep(s.w, `UPDATE execution_contexts SET last_used_at = ?3, expires_at = ?4, updated_at = ?5
		WHERE id = ?2 AND state IN ('creating', 'ready')`+scopeCond)
	s.terminateStmt = prep(s.w, `UPDATE execution_contexts SET state = ?3, reason = ?4, terminated_at = ?5,
		last_error = CASE WHEN ?6 = '' THEN last_error ELSE ?6 END, updated_at = ?7
		WHERE id = ?2 AND state IN ('creating', 'ready')`+scopeCond)
	s.keyStmt = prep(s.r, `SELECT t.id, t.name, t.guard_mode, t.admin, t.created_at, t.key_prefix, t.key_generation, t.guard_entities, t.idle_suspend_s
		FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.hash = ?`)
	return err
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
