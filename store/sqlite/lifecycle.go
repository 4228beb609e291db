package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store/internal/rules"
)

// steps are the Go steps of migrations: each runs after its migration's
// SQL, in the same transaction, for data SQL cannot move on its own.
var steps = map[int]func(ctx context.Context, tx *sql.Tx) error{
	6: liftLifecycle,
}

// liftLifecycle moves the lifecycle state rows keep under "sandlot."
// metadata keys into the columns migration 6 added (rules.LiftMetadata),
// leaving the caller's metadata alone.
func liftLifecycle(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, metadata FROM execution_contexts
		WHERE EXISTS (SELECT 1 FROM json_each(metadata) WHERE key LIKE 'sandlot.%')`)
	if err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	type row struct{ id, meta string }
	var todo []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.meta); err != nil {
			rows.Close()
			return fmt.Errorf("read metadata: %w", err)
		}
		todo = append(todo, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	for _, r := range todo {
		var meta map[string]string
		if err := json.Unmarshal([]byte(r.meta), &meta); err != nil {
			return fmt.Errorf("context %s: metadata: %w", r.id, err)
		}
		var l contexts.Lifecycle
		rest, _ := rules.LiftMetadata(meta, &l)
		args := append([]any{r.id, metaText(rest)}, lifecycleArgs(&l)...)
		if _, err := tx.ExecContext(ctx, `UPDATE execution_contexts SET metadata = ?2, paused_at = ?3,
			auto_pause_ms = ?4, auto_resume_ms = ?5, fixed_expiry = ?6, max_executions = ?7, network = ?8,
			template_name = ?9 WHERE id = ?1`, args...); err != nil {
			return fmt.Errorf("context %s: %w", r.id, err)
		}
	}
	return nil
}
