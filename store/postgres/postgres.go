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
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/migrate"
	"github.com/sandlot/sandlot/store/internal/seal"
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
	// SecretsKey encrypts the tenants' secret values at rest (AES-256-GCM,
	// seal.KeySize bytes); rows written before are sealed at Open. Every
	// daemon sharing the database needs the same key. nil: the store keeps
	// no new secrets (PutSecret fails with failed_precondition).
	SecretsKey []byte
}

// Store is a Postgres-backed store, safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	box  *seal.Box
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
	if cfg.SecretsKey != nil {
		if s.box, err = seal.New(cfg.SecretsKey); err == nil {
			err = s.sealSecrets(ctx)
		}
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: %w", err)
		}
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
			if step := steps[m.Version]; step != nil {
				if err := step(ctx, tx); err != nil {
					return err
				}
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

// Close implements contexts.Store.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}
