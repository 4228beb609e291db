package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sandlot/sandlot/tenant"
)

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
