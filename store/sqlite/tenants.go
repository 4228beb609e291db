package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/tenant"
)

const tenantCols = `id, name, guard_mode, admin, created_at, key_prefix, key_generation, guard_entities, idle_suspend_s`

func scanTenant(sc scanner) (*tenant.Tenant, error) {
	var (
		t        tenant.Tenant
		created  int64
		entities *string
	)
	if err := sc.Scan(&t.ID, &t.Name, &t.GuardMode, &t.Admin, &created, &t.KeyPrefix, &t.KeyGeneration, &entities, &t.IdleSuspendSeconds); err != nil {
		return nil, err
	}
	t.GuardEntities = tenant.DecodeEntities(entities)
	t.CreatedAt = fromMs(created)
	return &t, nil
}

// CreateTenant implements tenant.Store. It fills t.ID (when empty),
// t.GuardMode (enforce), t.CreatedAt and t.KeyGeneration (1).
func (s *Store) CreateTenant(ctx context.Context, t *tenant.Tenant, keyHash string) error {
	if err := rules.PrepareTenant(t, time.Now()); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create tenant: %w", err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `INSERT INTO tenants (`+tenantCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Name, t.GuardMode, t.Admin, ms(t.CreatedAt), t.KeyPrefix, t.KeyGeneration, tenant.EncodeEntities(t.GuardEntities), t.IdleSuspendSeconds)
	if isUnique(err) {
		if nameTaken(err) {
			return tenant.NameTaken(t.Name)
		}
		return fmt.Errorf("tenant %s: %w", t.ID, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("create tenant %s: %w", t.ID, err)
	}
	if keyHash != "" {
		_, err = tx.ExecContext(ctx, `INSERT INTO api_keys (id, hash, tenant_id, prefix, created_at) VALUES (?, ?, ?, ?, ?)`,
			tenant.NewKeyID(), keyHash, t.ID, t.KeyPrefix, nowMs())
		if isUnique(err) {
			return fmt.Errorf("tenant %s: key hash in use: %w", t.ID, errdefs.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("create tenant %s: key: %w", t.ID, err)
		}
	}
	return tx.Commit()
}

// TenantByKeyHash implements tenant.Store.
func (s *Store) TenantByKeyHash(ctx context.Context, keyHash string) (*tenant.Tenant, error) {
	t, err := scanTenant(s.keyStmt.QueryRowContext(ctx, keyHash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("key: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tenant by key: %w", err)
	}
	return t, nil
}

// GetTenant implements tenant.Store.
func (s *Store) GetTenant(ctx context.Context, id string) (*tenant.Tenant, error) {
	t, err := scanTenant(s.r.QueryRowContext(ctx, `SELECT `+tenantCols+` FROM tenants WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get tenant %s: %w", id, err)
	}
	return t, nil
}

// ListTenants implements tenant.Store, ordered by creation time.
func (s *Store) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+tenantCols+` FROM tenants ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	defer rows.Close()
	var out []*tenant.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, fmt.Errorf("list tenants: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetKey implements tenant.Store.
func (s *Store) SetKey(ctx context.Context, id, keyHash, keyPrefix string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("set key: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE tenants SET key_prefix = ?, key_generation = key_generation + 1 WHERE id = ?`, keyPrefix, id)
	if err != nil {
		return fmt.Errorf("set key of %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM api_keys WHERE tenant_id = ?`, id); err != nil {
		return fmt.Errorf("set key of %s: %w", id, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO api_keys (id, hash, tenant_id, prefix, created_at) VALUES (?, ?, ?, ?, ?)`,
		tenant.NewKeyID(), keyHash, id, keyPrefix, nowMs())
	if isUnique(err) {
		return fmt.Errorf("tenant %s: key hash in use: %w", id, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("set key of %s: %w", id, err)
	}
	return tx.Commit()
}

// UpdateTenant implements tenant.Store: it saves Name, GuardMode, Admin
// GuardEntities and IdleSuspendSeconds.
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
	res, err := s.w.ExecContext(ctx, `UPDATE tenants SET name = ?, guard_mode = ?, admin = ?, guard_entities = ?, idle_suspend_s = ? WHERE id = ?`,
		t.Name, t.GuardMode, t.Admin, tenant.EncodeEntities(t.GuardEntities), t.IdleSuspendSeconds, t.ID)
	if isUnique(err) && nameTaken(err) {
		return tenant.NameTaken(t.Name)
	}
	if err != nil {
		return fmt.Errorf("update tenant %s: %w", t.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("tenant %s: %w", t.ID, errdefs.ErrNotFound)
	}
	return nil
}

// DeleteTenant implements tenant.Store. Its key goes with it (cascade); its
// contexts and audit events stay.
func (s *Store) DeleteTenant(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM tenants WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete tenant %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// AppendAudit adds ev to the trail.
func (s *Store) AppendAudit(ctx context.Context, ev audit.Event) error {
	if err := rules.PrepareAudit(ctx, &ev, time.Now()); err != nil {
		return err
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO audit_events (tenant_id, context_id, kind, detail, at) VALUES (?, ?, ?, ?, ?)`,
		ev.TenantID, ev.ContextID, ev.Kind, metaText(ev.Detail), ms(ev.At))
	if err != nil {
		return fmt.Errorf("append audit %s: %w", ev.Kind, err)
	}
	return nil
}

// AppendAuditBatch adds evs to the trail in order, in one transaction:
// one commit (one WAL sync) for the batch instead of one per event.
func (s *Store) AppendAuditBatch(ctx context.Context, evs []audit.Event) error {
	evs, err := rules.PrepareAuditBatch(ctx, evs, time.Now())
	if err != nil || len(evs) == 0 {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO audit_events (tenant_id, context_id, kind, detail, at) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	defer st.Close()
	for _, ev := range evs {
		if _, err := st.ExecContext(ctx, ev.TenantID, ev.ContextID, ev.Kind, metaText(ev.Detail), ms(ev.At)); err != nil {
			return fmt.Errorf("append audit %s: %w", ev.Kind, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// PruneAudit removes at most limit events whose At is before before,
// oldest first, and returns how many it removed. It is system work (the
// cleanup sweep): a tenant-scoped ctx is refused.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	limit, err := rules.PreparePrune(ctx, limit)
	if err != nil {
		return 0, err
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM audit_events WHERE id IN
		(SELECT id FROM audit_events WHERE at < ? ORDER BY at LIMIT ?)`, ms(rules.Time(before)), limit)
	if err != nil {
		return 0, fmt.Errorf("prune audit: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// ListAudit returns the newest events first, of tenantID or of all tenants
// when it is empty; limit <= 0 means 100.
func (s *Store) ListAudit(ctx context.Context, tenantID string, limit int) ([]audit.Event, error) {
	return s.ListAuditKind(ctx, tenantID, "", limit)
}

// ListAuditKind is ListAudit of the events of kind ("" any).
func (s *Store) ListAuditKind(ctx context.Context, tenantID, kind string, limit int) ([]audit.Event, error) {
	q, args := auditQuery(scope(ctx), tenantID, kind, rules.AuditLimit(limit))
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []audit.Event
	for rows.Next() {
		var (
			ev     audit.Event
			detail string
			at     int64
		)
		if err := rows.Scan(&ev.ID, &ev.TenantID, &ev.ContextID, &ev.Kind, &detail, &at); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		if err := json.Unmarshal([]byte(detail), &ev.Detail); err != nil {
			return nil, fmt.Errorf("audit %d: detail: %w", ev.ID, err)
		}
		if len(ev.Detail) == 0 {
			ev.Detail = nil
		}
		ev.At = fromMs(at)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// auditQuery is ListAuditKind's statement and its arguments (?1 the scope,
// ?2 the tenant, ?3 the limit, ?4 the kind). A tenant, given or the scope's,
// is matched with tenant_id = ?2 and a kind with kind = ?4, never with an
// "empty or equal" form, which SQLite cannot search an index by: so a tenant's
// list reads audit_events_tenant_kind (migration 18) or audit_events_tenant,
// not the table every tenant shares. Only the all-tenants list of the
// system (no scope, no tenant) walks the table by id.
func auditQuery(scope, tenantID, kind string, limit int) (string, []any) {
	if tenantID == "" {
		tenantID = scope
	}
	q := `SELECT id, tenant_id, context_id, kind, detail, at FROM audit_events WHERE 1 = 1`
	if tenantID != "" {
		q += ` AND tenant_id = ?2`
	}
	args := []any{scope, tenantID, limit}
	if kind != "" {
		q += ` AND kind = ?4`
		args = append(args, kind)
	}
	return q + scopeCond + ` ORDER BY id DESC LIMIT ?3`, args
}

// nameTaken reports whether a unique violation is the tenants_name index's
// (a name in use), not the id's.
func nameTaken(err error) bool { return strings.Contains(err.Error(), "tenants.name") }
