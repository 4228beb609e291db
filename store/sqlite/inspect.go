package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/sandlot/sandlot/store/internal/migrate"
)

// Inspect reports where the database at path stands against this
// binary's migrations without changing it: it is opened query-only and
// nothing is created, so a file that does not exist yet is reported with
// every migration pending and exists false. sandlot doctor and
// sandlot migrate --dry-run read it.
func Inspect(ctx context.Context, path string) (st migrate.Status, exists bool, err error) {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return st, false, err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return migrate.Plan(ms, nil), false, nil
	} else if err != nil {
		return st, false, fmt.Errorf("sqlite %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", path+"?_query_only=1&_busy_timeout=5000")
	if err != nil {
		return st, true, fmt.Errorf("sqlite %s: %w", path, err)
	}
	defer db.Close()
	applied := map[int]bool{}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil {
		return st, true, fmt.Errorf("sqlite %s: %w", path, err)
	}
	if n > 0 {
		rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return st, true, fmt.Errorf("sqlite %s: read schema version: %w", path, err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				return st, true, fmt.Errorf("sqlite %s: read schema version: %w", path, err)
			}
			applied[v] = true
		}
		if err := rows.Err(); err != nil {
			return st, true, fmt.Errorf("sqlite %s: read schema version: %w", path, err)
		}
	}
	return migrate.Plan(ms, applied), true, nil
}
