package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
)

// Claim implements contexts.Store. Like Terminate it is a compare-and-set
// in the WHERE clause: a second claimer blocks on the row lock, re-reads
// the committed row, finds the node changed and updates nothing. A
// tenant-scoped claim runs as sandlot_app and can only reach that tenant's
// rows.
func (s *Store) Claim(ctx context.Context, id, from, to string) (bool, error) {
	if err := rules.CheckNode(to); err != nil {
		return false, err
	}
	if !validID(id) {
		return false, notFound(id)
	}
	var n int64
	err := s.run(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, `UPDATE execution_contexts SET node = $3
			WHERE id = $1 AND node = $2 AND state IN ('creating', 'ready')`, id, from, to)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return false, mapErr(err, "claim "+id)
	}
	if n == 1 {
		return true, nil
	}
	if _, err := s.Get(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}

// Heartbeat implements contexts.Store. nodes is a system table: the
// statement always runs as the owner, whatever tenant ctx carries.
func (s *Store) Heartbeat(ctx context.Context, node string, at time.Time) error {
	if err := rules.CheckNode(node); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO nodes (id, heartbeat_at) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at`, node, rules.Time(at))
	if err != nil {
		return mapErr(err, "heartbeat of node "+node)
	}
	return nil
}

// LastHeartbeat implements contexts.Store (as the owner, like Heartbeat).
func (s *Store) LastHeartbeat(ctx context.Context, node string) (time.Time, error) {
	var at time.Time
	err := s.pool.QueryRow(ctx, `SELECT heartbeat_at FROM nodes WHERE id = $1`, node).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("node %s: %w", node, errdefs.ErrNotFound)
	}
	if err != nil {
		return time.Time{}, mapErr(err, "last heartbeat of node "+node)
	}
	return at.UTC(), nil
}
