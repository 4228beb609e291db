package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
)

// lease is one row of the leases (AcquireLease).
type lease struct {
	holder  string
	expires time.Time // monotonic: this process's clock judges it
}

// AcquireLease implements contexts.Store. Every manager on a memory store
// is in this process, so its clock judges the expiry.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if err := rules.CheckLease(name, holder, ttl); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	now := time.Now()
	if l, ok := s.leases[name]; ok && l.holder != holder && now.Before(l.expires) {
		return false, nil
	}
	s.leases[name] = lease{holder: holder, expires: now.Add(ttl)}
	return true, nil
}

// ReleaseLease implements contexts.Store.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := rules.CheckLease(name, holder, 1); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	if l, ok := s.leases[name]; ok && l.holder == holder {
		delete(s.leases, name)
	}
	return nil
}
