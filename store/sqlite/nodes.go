package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
)

// Claim implements contexts.Store: a conditional UPDATE on the record's
// node, so of two daemons taking a record over exactly one sees a row
// change.
func (s *Store) Claim(ctx context.Context, id, from, to string) (bool, error) {
	if err := rules.CheckNode(to); err != nil {
		return false, err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE execution_contexts SET node = ?4, updated_at = ?5
		WHERE id = ?2 AND node = ?3 AND state IN ('creating', 'ready')`+scopeCond,
		scope(ctx), id, from, to, nowMs())
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	if _, err := s.Get(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}

// Heartbeat implements contexts.Store.
func (s *Store) Heartbeat(ctx context.Context, node string, at time.Time) error {
	if err := rules.CheckNode(node); err != nil {
		return err
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO nodes (id, heartbeat_at) VALUES (?, ?)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`, node, ms(at))
	if err != nil {
		return fmt.Errorf("heartbeat of node %s: %w", node, err)
	}
	return nil
}

// LastHeartbeat implements contexts.Store.
func (s *Store) LastHeartbeat(ctx context.Context, node string) (time.Time, error) {
	var at int64
	err := s.r.QueryRowContext(ctx, `SELECT heartbeat_at FROM nodes WHERE id = ?`, node).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("node %s: %w", node, errdefs.ErrNotFound)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("last heartbeat of node %s: %w", node, err)
	}
	return fromMs(at), nil
}
