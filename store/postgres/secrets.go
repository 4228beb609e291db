package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/store/internal/seal"
	"github.com/sandlot/sandlot/tenant"
)

const secretCols = `name, id, hosts, env, value, created_at, updated_at`

// secretScope runs secret statements as the tenant (row-level security),
// also when the caller did not scope ctx. A ctx scoped to another tenant
// sees nothing and may write nothing.
func secretScope(ctx context.Context, tenantID string) context.Context {
	if _, ok := tenant.FromContext(ctx); ok {
		return ctx
	}
	return tenant.WithID(ctx, tenantID)
}

// PutSecret implements secret.Store.
func (s *Store) PutSecret(ctx context.Context, tenantID string, sec secret.Stored) (secret.Stored, error) {
	if err := rules.PrepareSecret(ctx, tenantID, &sec, "", time.Time{}, time.Now()); err != nil {
		return secret.Stored{}, err
	}
	hosts, _ := json.Marshal(sec.Hosts)
	sealed, err := s.box.Seal(tenantID, sec.Name, sec.Value)
	if err != nil {
		return secret.Stored{}, fmt.Errorf("put secret %s: %w", sec.Name, err)
	}
	err = s.run(secretScope(ctx, tenantID), func(q querier) error {
		// On a replace the existing id and creation time stay: sandboxes
		// already hold the placeholder.
		return q.QueryRow(ctx, `INSERT INTO tenant_secrets (tenant_id, `+secretCols+`) VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8)
			ON CONFLICT (tenant_id, name) DO UPDATE SET hosts = excluded.hosts, env = excluded.env, value = excluded.value, updated_at = excluded.updated_at
			RETURNING id, created_at`,
			tenantID, sec.Name, sec.ID, string(hosts), sec.Env, sealed, sec.CreatedAt, sec.UpdatedAt).Scan(&sec.ID, &sec.CreatedAt)
	})
	if err != nil {
		if pgCode(err) == "23503" {
			return secret.Stored{}, fmt.Errorf("tenant %s: %w", tenantID, errdefs.ErrNotFound)
		}
		return secret.Stored{}, mapErr(err, "put secret "+sec.Name)
	}
	sec.CreatedAt = rules.Time(sec.CreatedAt)
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
	var out []secret.Stored
	err := s.run(secretScope(ctx, tenantID), func(q querier) error {
		rows, err := q.Query(ctx, `SELECT `+cols+` FROM tenant_secrets WHERE tenant_id = $1 ORDER BY name`, tenantID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var sec secret.Stored
			var hosts []byte
			if err := rows.Scan(&sec.Name, &sec.ID, &hosts, &sec.Env, &sec.Value, &sec.CreatedAt, &sec.UpdatedAt); err != nil {
				return err
			}
			if err := json.Unmarshal(hosts, &sec.Hosts); err != nil {
				return fmt.Errorf("secret %s: hosts: %w", sec.Name, err)
			}
			sec.CreatedAt, sec.UpdatedAt = rules.Time(sec.CreatedAt), rules.Time(sec.UpdatedAt)
			if values {
				if sec.Value, err = s.box.Open(tenantID, sec.Name, sec.Value); err != nil {
					return err
				}
			}
			out = append(out, sec)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapErr(err, "list secrets")
	}
	return out, nil
}

// DeleteSecret implements secret.Store.
func (s *Store) DeleteSecret(ctx context.Context, tenantID, name string) error {
	var n int64
	err := s.run(secretScope(ctx, tenantID), func(q querier) error {
		tag, err := q.Exec(ctx, `DELETE FROM tenant_secrets WHERE tenant_id = $1 AND name = $2`, tenantID, name)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "delete secret "+name)
	}
	if n == 0 {
		return rules.SecretNotFound(name)
	}
	return nil
}

// sealSecrets encrypts the values stored before the store had a key, and
// checks that the key opens a sealed value, so a wrong key stops the
// daemon at start rather than at a sandbox's first request. It runs as the
// schema's owner (row-level security does not confine it), in one
// transaction; a concurrent daemon starting with the same key seals the
// same rows to no harm (each UPDATE matches the plaintext only).
func (s *Store) sealSecrets(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("seal secrets: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := tx.Query(ctx, `SELECT tenant_id, name, value FROM tenant_secrets`)
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
		if _, err := tx.Exec(ctx, `UPDATE tenant_secrets SET value = $1 WHERE tenant_id = $2 AND name = $3 AND value = $4`, sealed[i], r.Tenant, r.Name, r.Value); err != nil {
			return fmt.Errorf("seal secret %s: %w", r.Name, err)
		}
	}
	return tx.Commit(ctx)
}
