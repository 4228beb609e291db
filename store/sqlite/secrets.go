package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/store/internal/seal"
)

const secretCols = `name, id, hosts, env, value, created_at, updated_at`

// PutSecret implements secret.Store.
func (s *Store) PutSecret(ctx context.Context, tenantID string, sec secret.Stored) (secret.Stored, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return secret.Stored{}, fmt.Errorf("put secret: %w", err)
	}
	defer tx.Rollback()
	var keep string
	var created int64
	err = tx.QueryRowContext(ctx, `SELECT id, created_at FROM tenant_secrets WHERE tenant_id = ? AND name = ?`, tenantID, sec.Name).Scan(&keep, &created)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return secret.Stored{}, fmt.Errorf("put secret: %w", err)
	}
	var createdAt time.Time
	if keep != "" {
		createdAt = fromMs(created)
	}
	if err := rules.PrepareSecret(ctx, tenantID, &sec, keep, createdAt, time.Now()); err != nil {
		return secret.Stored{}, err
	}
	hosts, _ := json.Marshal(sec.Hosts)
	sealed, err := s.box.Seal(tenantID, sec.Name, sec.Value)
	if err != nil {
		return secret.Stored{}, fmt.Errorf("put secret %s: %w", sec.Name, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO tenant_secrets (tenant_id, `+secretCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, name) DO UPDATE SET hosts = excluded.hosts, env = excluded.env, value = excluded.value, updated_at = excluded.updated_at`,
		tenantID, sec.Name, sec.ID, string(hosts), sec.Env, sealed, ms(sec.CreatedAt), ms(sec.UpdatedAt))
	if err != nil {
		var e *sqlite.Error
		if errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
			return secret.Stored{}, fmt.Errorf("tenant %s: %w", tenantID, errdefs.ErrNotFound)
		}
		return secret.Stored{}, fmt.Errorf("put secret %s: %w", sec.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return secret.Stored{}, fmt.Errorf("put secret %s: %w", sec.Name, err)
	}
	return sec, nil
}

// GetSecrets implements secret.Store.
func (s *Store) GetSecrets(ctx context.Context, tenantID string, names []string) ([]secret.Stored, error) {
	all, err := s.querySecrets(ctx, tenantID, true)
	if err != nil {
		return nil, err
	}
	return rules.PickSecrets(all, names)
}

// ListSecrets implements secret.Store.
func (s *Store) ListSecrets(ctx context.Context, tenantID string) ([]secret.Stored, error) {
	return s.querySecrets(ctx, tenantID, false)
}

func (s *Store) querySecrets(ctx context.Context, tenantID string, values bool) ([]secret.Stored, error) {
	cols := secretCols
	if !values {
		cols = strings.Replace(cols, "value", "''", 1)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+cols+` FROM tenant_secrets WHERE tenant_id = ?2`+scopeCond+` ORDER BY name`, scope(ctx), tenantID)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	var out []secret.Stored
	for rows.Next() {
		var sec secret.Stored
		var hosts string
		var created, updated int64
		if err := rows.Scan(&sec.Name, &sec.ID, &hosts, &sec.Env, &sec.Value, &created, &updated); err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		if err := json.Unmarshal([]byte(hosts), &sec.Hosts); err != nil {
			return nil, fmt.Errorf("secret %s: hosts: %w", sec.Name, err)
		}
		sec.CreatedAt, sec.UpdatedAt = fromMs(created), fromMs(updated)
		if values {
			if sec.Value, err = s.box.Open(tenantID, sec.Name, sec.Value); err != nil {
				return nil, err
			}
		}
		out = append(out, sec)
	}
	return out, rows.Err()
}

// DeleteSecret implements secret.Store.
func (s *Store) DeleteSecret(ctx context.Context, tenantID, name string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM tenant_secrets WHERE tenant_id = ?2 AND name = ?3`+scopeCond, scope(ctx), tenantID, name)
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return rules.SecretNotFound(name)
	}
	return nil
}

// sealSecrets encrypts the values stored before the store had a key, and
// checks that the key opens a sealed value, so a wrong key stops the
// daemon at start rather than at a sandbox's first request.
func (s *Store) sealSecrets(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("seal secrets: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT tenant_id, name, value FROM tenant_secrets`)
	if err != nil {
		return fmt.Errorf("seal secrets: %w", err)
	}
	var all []seal.Row
	for rows.Next() {
		var r seal.Row
		if err := rows.Scan(&r.Tenant, &r.Name, &r.Value); err != nil {
			rows.Close()
			return fmt.Errorf("seal secrets: %w", err)
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("seal secrets: %w", err)
	}
	plain, sealed, err := s.box.Unsealed(all)
	if err != nil {
		return err
	}
	for i, r := range plain {
		if _, err := tx.ExecContext(ctx, `UPDATE tenant_secrets SET value = ? WHERE tenant_id = ? AND name = ? AND value = ?`, sealed[i], r.Tenant, r.Name, r.Value); err != nil {
			return fmt.Errorf("seal secret %s: %w", r.Name, err)
		}
	}
	return tx.Commit()
}
