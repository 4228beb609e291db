package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/migrate"
)

// Inspect reports where the database at url stands against this binary's
// migrations without changing it (one connection, reads only; no lock):
// sandlot doctor and sandlot migrate --dry-run read it. A schema without
// schema_migrations has every migration pending.
func Inspect(ctx context.Context, url string) (migrate.Status, error) {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return migrate.Status{}, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return migrate.Status{}, fmt.Errorf("postgres: %w: %w", errdefs.ErrUnavailable, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var table *string
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations')::text`).Scan(&table); err != nil {
		return migrate.Status{}, fmt.Errorf("postgres: %w", err)
	}
	applied := map[int]bool{}
	if table != nil {
		rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return migrate.Status{}, fmt.Errorf("postgres: read schema version: %w", err)
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return migrate.Status{}, fmt.Errorf("postgres: read schema version: %w", err)
		}
		for _, v := range versions {
			applied[v] = true
		}
	}
	return migrate.Plan(ms, applied), nil
}
