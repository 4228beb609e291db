package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/store/internal/rules"
)

// AcquireLease implements contexts.Store: a conditional upsert on the one
// writer connection, so of two daemons on the file exactly one sees a row
// change. The daemons sharing a SQLite file share its host, and its clock
// judges the expiry. The expiry is rounded up to the next millisecond, so
// the lease never ends before now+ttl, which the holder counts on. A
// renewal never shortens it: of two renewals by one daemon, the one that
// read the clock first may reach the writer second.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if err := rules.CheckLease(name, holder, ttl); err != nil {
		return false, err
	}
	now := time.Now()
	res, err := s.w.ExecContext(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,
			expires_at = MAX(leases.expires_at, excluded.expires_at)
		WHERE leases.holder = excluded.holder OR leases.expires_at <= ?4`,
		name, holder, ms(now.Add(ttl))+1, ms(now))
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ReleaseLease implements contexts.Store.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := rules.CheckLease(name, holder, 1); err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}
