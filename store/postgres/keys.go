package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/tenant"
)

var _ tenant.Keys = (*Store)(nil)

// AddKey implements tenant.Keys. Under a tenant-scoped ctx it runs as the
// tenant's role, so row-level security holds it to that tenant's keys.
// The tenant's row is locked for the count, so MaxKeys holds under
// concurrent calls.
func (s *Store) AddKey(ctx context.Context, k *tenant.Key, keyHash string) error {
	if err := tenant.CheckKeyName(k.Name); err != nil {
		return err
	}
	id := tenant.NewKeyID()
	var (
		created time.Time
		n       int
	)
	// One statement (s.run's rule): the CTE counts the tenant's keys under
	// a lock on them, and the INSERT adds the key only below MaxKeys.
	err := s.run(ctx, func(q querier) error {
		return q.QueryRow(ctx, `WITH mine AS (SELECT id FROM api_keys WHERE tenant_id = $3 FOR UPDATE),
			n AS (SELECT count(*) AS n FROM mine),
			ins AS (INSERT INTO api_keys (id, hash, tenant_id, name, prefix)
				SELECT $1, $2, $3, $4, $5 FROM n WHERE n.n < $6 AND n.n > 0
				RETURNING created_at)
			SELECT (SELECT n FROM n), coalesce((SELECT created_at FROM ins), 'epoch'::timestamptz)`,
			id, keyHash, k.TenantID, k.Name, k.Prefix, tenant.MaxKeys).Scan(&n, &created)
	})
	if err != nil {
		return mapErr(err, "add key")
	}
	switch {
	case n == 0:
		// A tenant has a key from its creation on: none means no tenant
		// (or, scoped, another tenant's id).
		return fmt.Errorf("tenant %s: %w", k.TenantID, errdefs.ErrNotFound)
	case n >= tenant.MaxKeys:
		return tenant.TooManyKeys()
	}
	k.ID, k.CreatedAt, k.LastUsedAt = id, created.UTC(), nil
	return nil
}

// ListKeys implements tenant.Keys.
func (s *Store) ListKeys(ctx context.Context, tenantID string) ([]*tenant.Key, error) {
	var out []*tenant.Key
	err := s.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT id, tenant_id, name, prefix, created_at, last_used_at FROM api_keys
			WHERE tenant_id = $1 ORDER BY created_at, id`, tenantID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k tenant.Key
			if err := rows.Scan(&k.ID, &k.TenantID, &k.Name, &k.Prefix, &k.CreatedAt, &k.LastUsedAt); err != nil {
				return err
			}
			k.CreatedAt = k.CreatedAt.UTC()
			if k.LastUsedAt != nil {
				at := k.LastUsedAt.UTC()
				k.LastUsedAt = &at
			}
			out = append(out, &k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapErr(err, "list keys")
	}
	return out, nil
}

// RevokeKey implements tenant.Keys in one statement: the tenant's keys
// are locked while they are counted, so two revocations of its last two
// keys cannot both pass the count.
func (s *Store) RevokeKey(ctx context.Context, tenantID, id string) (string, error) {
	var (
		hash  *string
		found bool
	)
	err := s.run(ctx, func(q querier) error {
		return q.QueryRow(ctx, `WITH mine AS (SELECT id FROM api_keys WHERE tenant_id = $2 FOR UPDATE),
			del AS (DELETE FROM api_keys WHERE id = $1 AND tenant_id = $2 AND (SELECT count(*) FROM mine) > 1
				RETURNING hash)
			SELECT (SELECT hash FROM del), EXISTS (SELECT 1 FROM mine WHERE id = $1)`, id, tenantID).Scan(&hash, &found)
	})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", mapErr(err, "revoke key")
	}
	switch {
	case hash != nil:
		return *hash, nil
	case found:
		return "", tenant.LastKey(id)
	}
	return "", fmt.Errorf("key %s: %w", id, errdefs.ErrNotFound)
}

// KeyUsed implements tenant.Keys (system work: the key's tenant is not
// known yet when it authenticates).
func (s *Store) KeyUsed(ctx context.Context, keyHash string, at time.Time) error {
	if _, err := s.pool.Exec(ctx, `UPDATE api_keys SET last_used_at = $2 WHERE hash = $1`, keyHash, rules.Time(at)); err != nil {
		return mapErr(err, "key used")
	}
	return nil
}
