package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
)

// Claim implements contexts.Store.
func (s *Store) Claim(ctx context.Context, id, from, to string) (bool, error) {
	if err := rules.CheckNode(to); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(ctx, id)
	if err != nil {
		return false, err
	}
	if !r.State.Active() || r.Node != from {
		return false, nil
	}
	r.Node = to
	return true, nil
}

// Heartbeat implements contexts.Store.
func (s *Store) Heartbeat(ctx context.Context, node string, at time.Time) error {
	if err := rules.CheckNode(node); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	s.nodes[node] = rules.Time(at)
	return nil
}

// LastHeartbeat implements contexts.Store.
func (s *Store) LastHeartbeat(ctx context.Context, node string) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Time{}, fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	at, ok := s.nodes[node]
	if !ok {
		return time.Time{}, fmt.Errorf("node %s: %w", node, errdefs.ErrNotFound)
	}
	return at, nil
}
