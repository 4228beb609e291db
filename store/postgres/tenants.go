package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/tenant"
)

const tenantCols = `t.id, t.name, t.guard_mode, t.admin, t.created_at, t.key_prefix, t.key_generation, t.guard_entities, t.idle_suspend_s`

func scanTenant(row pgx.Row) (*tenant.Tenant, error) {
	var (
		t        tenant.Tenant
		entities *string
	)
	if err := row.Scan(&t.ID, &t.Name, &t.GuardMode, &t.Admin, &t.CreatedAt, &t.KeyPrefix, &t.KeyGeneration, &entities, &t.IdleSuspendSeconds); err != nil {
		return nil, err
	}
	t.GuardEntities = tenant.DecodeEntities(entities)
	t.CreatedAt = t.CreatedAt.UTC()
	return &t, nil
}

// CreateTenant implements tenant.Store. It fills t.ID (when empty),
// t.GuardMode (enforce), t.CreatedAt and t.KeyGeneration (1). Tenant tables are system tables:
// they are never tenant-scoped.
func (s *Store) CreateTenant(ctx context.Context, t *tenant.Tenant, keyHash string) error {
	if err := rules.PrepareTenant(t, time.Now()); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO tenants (id, name, guard_mode, admin, created_at, key_prefix, key_generation, guard_entities, idle_suspend_s)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, t.ID, t.Name, t.GuardMode, t.Admin, t.CreatedAt, t.KeyPrefix, t.KeyGeneration,
			tenant.EncodeEntities(t.GuardEntities), t.IdleSuspendSeconds); err != nil {
			return err
		}
		if keyHash == "" {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO api_keys (id, hash, tenant_id, prefix) VALUES ($1, $2, $3, $4)`,
			tenant.NewKeyID(), keyHash, t.ID, t.KeyPrefix)
		return err
	})
	if nameTaken(err) {
		return tenant.NameTaken(t.Name)
	}
	if err != nil {
		return mapErr(err, "create tenant "+t.ID)
	}
	return nil
}

// nameTaken reports whether err is a violation of the tenants_name index
// (a name in use), not of the id's key.
func nameTaken(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "tenants_name"
}

// TenantByKeyHash implements tenant.Store.
func (s *Store) TenantByKeyHash(ctx context.Context, keyHash string) (*tenant.Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantCols+`
		FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.hash = $1`, keyHash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("key: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr(err, "tenant by key")
	}
	return t, nil
}

// GetTenant implements tenant.Store.
func (s *Store) GetTenant(ctx context.Context, id string) (*tenant.Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantCols+` FROM tenants t WHERE t.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr(err, "get tenant "+id)
	}
	return t, nil
}

// ListTenants implements tenant.Store, ordered by creation time.
func (s *Store) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tenantCols+` FROM tenants t ORDER BY t.created_at, t.id`)
	if err != nil {
		return nil, mapErr(err, "list tenants")
	}
	defer rows.Close()
	var out []*tenant.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, mapErr(err, "list tenants")
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetKey implements tenant.Store.
func (s *Store) SetKey(ctx context.Context, id, keyHash, keyPrefix string) error {
	errNoTenant := fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE tenants SET key_prefix = $2, key_generation = key_generation + 1 WHERE id = $1`, id, keyPrefix)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errNoTenant
		}
		if _, err := tx.Exec(ctx, `DELETE FROM api_keys WHERE tenant_id = $1`, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO api_keys (id, hash, tenant_id, prefix) VALUES ($1, $2, $3, $4)`,
			tenant.NewKeyID(), keyHash, id, keyPrefix)
		return err
	})
	if errors.Is(err, errNoTenant) {
		return err
	}
	if err != nil {
		return mapErr(err, "set key of "+id)
	}
	return nil
}

// UpdateTenant implements tenant.Store: it saves Name, GuardMode, Admin
// and GuardEntities.
func (s *Store) UpdateTenant(ctx context.Context, t *tenant.Tenant) error {
	if err := rules.CheckGuardMode(t.GuardMode); err != nil {
		return err
	}
	if err := rules.CheckGuardEntities(t.GuardEntities); err != nil {
		return err
	}
	if err := rules.CheckIdleSuspend(t.IdleSuspendSeconds); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET name = $2, guard_mode = $3, admin = $4, guard_entities = $5, idle_suspend_s = $6 WHERE id = $1`,
		t.ID, t.Name, t.GuardMode, t.Admin, tenant.EncodeEntities(t.GuardEntities), t.IdleSuspendSeconds)
	if nameTaken(err) {
		return tenant.NameTaken(t.Name)
	}
	if err != nil {
		return mapErr(err, "update tenant "+t.ID)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenant %s: %w", t.ID, errdefs.ErrNotFound)
	}
	return nil
}

// DeleteTenant implements tenant.Store. Its key goes with it (cascade); its
// contexts and audit events stay.
func (s *Store) DeleteTenant(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, id)
	if err != nil {
		return mapErr(err, "delete tenant "+id)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// AppendAudit adds ev to the trail.
func (s *Store) AppendAudit(ctx context.Context, ev audit.Event) error {
	if err := rules.PrepareAudit(ctx, &ev, time.Now()); err != nil {
		return err
	}
	err := s.run(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `INSERT INTO audit_events (tenant_id, context_id, kind, detail, at)
			VALUES ($1, $2, $3, $4::jsonb, $5)`, ev.TenantID, ev.ContextID, ev.Kind, mapText(ev.Detail), ev.At)
		return err
	})
	if err != nil {
		return mapErr(err, "append audit "+ev.Kind)
	}
	return nil
}

// ListAudit returns the newest events first, of tenantID or of all tenants
// when it is empty; limit <= 0 means 100.
func (s *Store) ListAudit(ctx context.Context, tenantID string, limit int) ([]audit.Event, error) {
	return s.ListAuditKind(ctx, tenantID, "", limit)
}

// ListAuditKind is ListAudit of the events of kind ("" any).
func (s *Store) ListAuditKind(ctx context.Context, tenantID, kind string, limit int) ([]audit.Event, error) {
	var out []audit.Event
	if tenantID == "" {
		// A tenant's ctx sees only its rows (row-level security); saying
		// so lets the planner search the index by tenant.
		tenantID, _ = tenant.FromContext(ctx)
	}
	sql, args := auditQuery(tenantID, kind, rules.AuditLimit(limit))
	err := s.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				ev     audit.Event
				detail []byte
			)
			if err := rows.Scan(&ev.ID, &ev.TenantID, &ev.ContextID, &ev.Kind, &detail, &ev.At); err != nil {
				return err
			}
			if err := json.Unmarshal(detail, &ev.Detail); err != nil {
				return fmt.Errorf("audit %d: detail: %w", ev.ID, err)
			}
			if len(ev.Detail) == 0 {
				ev.Detail = nil
			}
			ev.At = ev.At.UTC()
			out = append(out, ev)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, mapErr(err, "list audit")
	}
	return out, nil
}

// auditQuery is ListAuditKind's statement and its arguments: tenant_id =
// and kind = only where given, never an "empty or equal" form, so that a
// tenant's list of one kind searches audit_events_tenant_kind (migration
// 18), a tenant's list of any kind audit_events_tenant; only the
// all-tenants list of the system walks the table by id.
func auditQuery(tenantID, kind string, limit int) (string, []any) {
	q := `SELECT id, tenant_id, context_id, kind, detail, at FROM audit_events WHERE true`
	args := []any{limit}
	if tenantID != "" {
		args = append(args, tenantID)
		q += fmt.Sprintf(` AND tenant_id = $%d`, len(args))
	}
	if kind != "" {
		args = append(args, kind)
		q += fmt.Sprintf(` AND kind = $%d`, len(args))
	}
	return q + ` ORDER BY id DESC LIMIT $1`, args
}

// AppendAuditBatch adds evs to the trail in order, in one statement (one
// round trip and one commit for the batch).
func (s *Store) AppendAuditBatch(ctx context.Context, evs []audit.Event) error {
	evs, err := rules.PrepareAuditBatch(ctx, evs, time.Now())
	if err != nil || len(evs) == 0 {
		return err
	}
	tenants, ctxIDs, kinds, details, ats := make([]string, len(evs)), make([]string, len(evs)),
		make([]string, len(evs)), make([]string, len(evs)), make([]time.Time, len(evs))
	for i, ev := range evs {
		tenants[i], ctxIDs[i], kinds[i], details[i], ats[i] = ev.TenantID, ev.ContextID, ev.Kind, mapText(ev.Detail), ev.At
	}
	// WITH ORDINALITY and ORDER BY: ids are assigned in the batch's order.
	err = s.run(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `INSERT INTO audit_events (tenant_id, context_id, kind, detail, at)
			SELECT t, c, k, d::jsonb, a FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
				WITH ORDINALITY AS u(t, c, k, d, a, n) ORDER BY n`, tenants, ctxIDs, kinds, details, ats)
		return err
	})
	if err != nil {
		return mapErr(err, "append audit")
	}
	return nil
}

// PruneAudit removes at most limit events whose At is before before,
// oldest first, and returns how many it removed. It is system work (the
// cleanup sweep, as the owner: the tenant role may not delete audit
// rows); a tenant-scoped ctx is refused.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	limit, err := rules.PreparePrune(ctx, limit)
	if err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit_events WHERE id IN
		(SELECT id FROM audit_events WHERE at < $1 ORDER BY at LIMIT $2)`, rules.Time(before), limit)
	if err != nil {
		return 0, mapErr(err, "prune audit")
	}
	return int(tag.RowsAffected()), nil
}
