package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store/internal/rules"
)

// steps are the Go steps of migrations: each runs after its migration's
// SQL, in the same transaction, for data SQL cannot move on its own.
var steps = map[int]func(ctx context.Context, tx pgx.Tx) error{
	6: liftLifecycle,
}

// liftLifecycle moves the lifecycle state rows keep under "sandlot."
// metadata keys into the columns migration 6 added (rules.LiftMetadata),
// leaving the caller's metadata alone. It runs as the owner, who row-level
// security does not confine.
func liftLifecycle(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT id::text, metadata FROM execution_contexts
		WHERE EXISTS (SELECT 1 FROM jsonb_object_keys(metadata) AS k WHERE starts_with(k, 'sandlot.'))`)
	if err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	type row struct {
		id   string
		meta []byte
	}
	todo, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var v row
		err := r.Scan(&v.id, &v.meta)
		return v, err
	})
	if err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	for _, r := range todo {
		var meta map[string]string
		if err := json.Unmarshal(r.meta, &meta); err != nil {
			return fmt.Errorf("context %s: metadata: %w", r.id, err)
		}
		var l contexts.Lifecycle
		rest, _ := rules.LiftMetadata(meta, &l)
		args := append([]any{r.id, mapText(rest)}, lifecycleArgs(&l)...)
		if _, err := tx.Exec(ctx, `UPDATE execution_contexts SET metadata = $2::jsonb, `+lifecycleSet(3)+`
			WHERE id = $1`, args...); err != nil {
			return fmt.Errorf("context %s: %w", r.id, err)
		}
	}
	return nil
}
