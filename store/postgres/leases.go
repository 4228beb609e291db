package postgres

import (
	"context"
	"time"

	"github.com/sandlot/sandlot/store/internal/rules"
)

// AcquireLease implements contexts.Store. One statement does the
// compare-and-set: the insert of a free name, or the update of a row this
// holder has or whose expiry passed. Of two daemons racing, the second
// waits on the row lock, re-reads the committed row, finds another's live
// lease and changes nothing. Times are the database's (clock_timestamp),
// so the daemons' clocks play no part; the expiry is rounded up a
// microsecond, so the lease never ends before now+ttl, which the holder
// counts on. A renewal never shortens the lease: the VALUES clause's
// clock is read before the statement waits on the row lock, so a renewal
// that waited behind a later one would otherwise pull the expiry back
// under a grant its holder already counts on; the update reads the clock
// again and keeps the later expiry. A system table: it runs as the
// owner whatever tenant ctx carries.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if err := rules.CheckLease(name, holder, ttl); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO leases (name, holder, expires_at)
		VALUES ($1, $2, clock_timestamp() + $3 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,
			expires_at = GREATEST(leases.expires_at, clock_timestamp() + $3 * interval '1 microsecond')
		WHERE leases.holder = EXCLUDED.holder OR leases.expires_at <= clock_timestamp()`,
		name, holder, ttl.Microseconds()+1)
	if err != nil {
		return false, mapErr(err, "acquire lease "+name)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseLease implements contexts.Store.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := rules.CheckLease(name, holder, 1); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2`, name, holder); err != nil {
		return mapErr(err, "release lease "+name)
	}
	return nil
}
