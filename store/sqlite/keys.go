package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/tenant"
)

var _ tenant.Keys = (*Store)(nil)

// AddKey implements tenant.Keys. The count and the insert share the
// write transaction, so MaxKeys holds under concurrent calls.
func (s *Store) AddKey(ctx context.Context, k *tenant.Key, keyHash string) error {
	if err := tenant.CheckKeyName(k.Name); err != nil {
		return err
	}
	if !rules.Visible(ctx, k.TenantID) {
		return fmt.Errorf("tenant %s: %w", k.TenantID, errdefs.ErrNotFound)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add key: %w", err)
	}
	defer tx.Rollback()
	var n int
	err = tx.QueryRowContext(ctx, `SELECT count(*) FROM api_keys WHERE tenant_id = ?`, k.TenantID).Scan(&n)
	if err != nil {
		return fmt.Errorf("add key: %w", err)
	}
	if n >= tenant.MaxKeys {
		return tenant.TooManyKeys()
	}
	id, now := tenant.NewKeyID(), nowMs()
	_, err = tx.ExecContext(ctx, `INSERT INTO api_keys (id, hash, tenant_id, name, prefix, created_at)
		SELECT ?, ?, id, ?, ?, ? FROM tenants WHERE id = ?`, id, keyHash, k.Name, k.Prefix, now, k.TenantID)
	if isUnique(err) {
		return fmt.Errorf("key hash in use: %w", errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("add key: %w", err)
	}
	if n == 0 {
		// A tenant has a key from its creation on, so none means the
		// INSERT found no tenant row.
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tenants WHERE id = ?)`, k.TenantID).Scan(&exists); err != nil {
			return fmt.Errorf("add key: %w", err)
		}
		if !exists {
			return fmt.Errorf("tenant %s: %w", k.TenantID, errdefs.ErrNotFound)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add key: %w", err)
	}
	k.ID, k.CreatedAt, k.LastUsedAt = id, fromMs(now), nil
	return nil
}

// ListKeys implements tenant.Keys.
func (s *Store) ListKeys(ctx context.Context, tenantID string) ([]*tenant.Key, error) {
	if !rules.Visible(ctx, tenantID) {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, tenant_id, name, prefix, created_at, last_used_at FROM api_keys
		WHERE tenant_id = ? ORDER BY created_at, id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []*tenant.Key
	for rows.Next() {
		var (
			k       tenant.Key
			created int64
			used    sql.NullInt64
		)
		if err := rows.Scan(&k.ID, &k.TenantID, &k.Name, &k.Prefix, &created, &used); err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		k.CreatedAt = fromMs(created)
		if used.Valid {
			at := fromMs(used.Int64)
			k.LastUsedAt = &at
		}
		out = append(out, &k)
	}
	return out, rows.Err()
}

// RevokeKey implements tenant.Keys, in one write transaction: two
// revocations of a tenant's last two keys cannot both pass the count.
func (s *Store) RevokeKey(ctx context.Context, tenantID, id string) (string, error) {
	if !rules.Visible(ctx, tenantID) {
		return "", fmt.Errorf("key %s: %w", id, errdefs.ErrNotFound)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("revoke key: %w", err)
	}
	defer tx.Rollback()
	var hash string
	err = tx.QueryRowContext(ctx, `SELECT hash FROM api_keys WHERE id = ? AND tenant_id = ?`, id, tenantID).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("key %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("revoke key: %w", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM api_keys WHERE tenant_id = ?`, tenantID).Scan(&n); err != nil {
		return "", fmt.Errorf("revoke key: %w", err)
	}
	if n <= 1 {
		return "", tenant.LastKey(id)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM api_keys WHERE id = ? AND tenant_id = ?`, id, tenantID); err != nil {
		return "", fmt.Errorf("revoke key: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("revoke key: %w", err)
	}
	return hash, nil
}

// KeyUsed implements tenant.Keys.
func (s *Store) KeyUsed(ctx context.Context, keyHash string, at time.Time) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ? WHERE hash = ?`, ms(at), keyHash); err != nil {
		return fmt.Errorf("key used: %w", err)
	}
	return nil
}
