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

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/store/internal/seal"
	"github.com/sandlot/sandlot/tenant"
)

const recordCols = `id, tenant_id, conversation_id, path_id, state, reason, sandbox_id, provider, template,
	created_at, last_used_at, expires_at, terminated_at, execution_count, total_execution_time_ms,
	last_error, resource_usage, metadata, node,
	paused_at, auto_pause_ms, auto_resume_ms, fixed_expiry, max_executions, network, template_name, user_id, suspend_image, env, suspend_held, auto_pause_disk`

// scopeCond restricts a statement to the tenant in ctx; its two arguments
// come from scope(ctx).
const scopeCond = ` AND (?1 = '' OR tenant_id = ?1)`

func scope(ctx context.Context) string {
	id, _ := tenant.FromContext(ctx)
	return id
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

func nowMs() int64 { return time.Now().UnixMilli() }

type scanner interface{ Scan(dest ...any) error }

func scanRecord(sc scanner, box *seal.Box) (*contexts.Record, error) {
	var (
		r                        contexts.Record
		created, used, expires   int64
		terminated, paused       sql.NullInt64
		usage, meta, state, reas string
		autoPause, autoResume    int64
		network                  sql.NullString
		env                      string
	)
	err := sc.Scan(&r.ID, &r.TenantID, &r.ConversationID, &r.PathID, &state, &reas, &r.SandboxID, &r.Provider,
		&r.Template, &created, &used, &expires, &terminated, &r.ExecutionCount, &r.TotalExecutionTimeMs,
		&r.LastError, &usage, &meta, &r.Node,
		&paused, &autoPause, &autoResume, &r.FixedExpiry, &r.MaxExecutions, &network, &r.TemplateName, &r.UserID, &r.SuspendImage, &env, &r.SuspendHeld, &r.AutoPauseToDisk)
	if err != nil {
		return nil, err
	}
	r.State, r.Reason = contexts.State(state), contexts.Reason(reas)
	r.CreatedAt, r.LastUsedAt, r.ExpiresAt = fromMs(created), fromMs(used), fromMs(expires)
	r.TerminatedAt, r.PausedAt = fromNullMs(terminated), fromNullMs(paused)
	r.AutoPause, r.AutoResume = time.Duration(autoPause)*time.Millisecond, time.Duration(autoResume)*time.Millisecond
	if network.Valid {
		r.Network = new(policy.Policy)
		if err := json.Unmarshal([]byte(network.String), r.Network); err != nil {
			return nil, fmt.Errorf("context %s: network: %w", r.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(usage), &r.ResourceUsage); err != nil {
		return nil, fmt.Errorf("context %s: resource_usage: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(meta), &r.Metadata); err != nil {
		return nil, fmt.Errorf("context %s: metadata: %w", r.ID, err)
	}
	if len(r.Metadata) == 0 {
		r.Metadata = nil
	}
	if err := rules.OpenEnv(box, &r, env); err != nil {
		return nil, err
	}
	return &r, nil
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of strings and plain structs reach here.
		panic(err)
	}
	return string(b)
}

func metaText(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	return jsonText(m)
}

// termMs is a nullable time column's value.
func termMs(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ms(*t)
}

func fromNullMs(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMs(v.Int64)
	return &t
}

// networkText is the network column's value: the policy's JSON, or NULL.
func networkText(p *policy.Policy) any {
	if p == nil {
		return nil
	}
	return jsonText(p)
}

// lifecycleArgs are the values of the lifecycle columns, in recordCols
// order.
func lifecycleArgs(l *contexts.Lifecycle) []any {
	return []any{termMs(l.PausedAt), l.AutoPause.Milliseconds(), l.AutoResume.Milliseconds(), l.FixedExpiry,
		l.MaxExecutions, networkText(l.Network), l.TemplateName}
}

func isUnique(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

func notFound(id string) error { return fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound) }

// Create implements contexts.Store.
func (s *Store) Create(ctx context.Context, rec *contexts.Record) error {
	if err := rules.PrepareCreate(ctx, rec, time.Now()); err != nil {
		return err
	}
	env, err := rules.SealEnv(s.box, rec)
	if err != nil {
		return err
	}
	args := append([]any{rec.ID, rec.TenantID, rec.ConversationID, rec.PathID, string(rec.State), string(rec.Reason), rec.SandboxID,
		rec.Provider, rec.Template, ms(rec.CreatedAt), ms(rec.LastUsedAt), ms(rec.ExpiresAt), termMs(rec.TerminatedAt),
		rec.ExecutionCount, rec.TotalExecutionTimeMs, rec.LastError, jsonText(rec.ResourceUsage), metaText(rec.Metadata),
		rec.Node}, append(lifecycleArgs(&rec.Lifecycle), rec.UserID, rec.SuspendImage, env, rec.SuspendHeld, rec.AutoPauseToDisk)...)
	_, err = s.w.ExecContext(ctx, `INSERT INTO execution_contexts (`+recordCols+`, updated_at)
		VALUES (`+strings.Repeat("?, ", len(args))+`?)`, append(args, nowMs())...)
	if isUnique(err) {
		return fmt.Errorf("context %s for %s/%s/%s: %w", rec.ID, rec.TenantID, rec.ConversationID, rec.PathID, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("create context %s: %w", rec.ID, err)
	}
	return nil
}

// Get implements contexts.Store.
func (s *Store) Get(ctx context.Context, id string) (*contexts.Record, error) {
	r, err := scanRecord(s.getStmt.QueryRowContext(ctx, scope(ctx), id), s.box)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get context %s: %w", id, err)
	}
	return r, nil
}

// GetActive implements contexts.Store.
func (s *Store) GetActive(ctx context.Context, id contexts.Identity) (*contexts.Record, error) {
	r, err := scanRecord(s.getActiveStmt.QueryRowContext(ctx, scope(ctx), id.TenantID, id.ConversationID, id.PathID, id.UserID), s.box)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("active context of %s/%s/%s: %w", id.TenantID, id.ConversationID, id.PathID, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get active context: %w", err)
	}
	return r, nil
}

// Update implements contexts.Store.
func (s *Store) Update(ctx context.Context, rec *contexts.Record) error {
	if err := rules.CheckUpdate(rec.ID, contexts.StateReady, rec.State); err != nil {
		return err
	}
	if err := rules.CheckRecord(rec); err != nil {
		return err
	}
	args := append([]any{scope(ctx), rec.ID, string(rec.State), string(rec.Reason), rec.SandboxID, rec.Provider, rec.Template,
		ms(rules.Time(rec.LastUsedAt)), ms(rules.Time(rec.ExpiresAt)), termMs(rec.TerminatedAt),
		rec.ExecutionCount, rec.TotalExecutionTimeMs, rec.LastError, jsonText(rec.ResourceUsage),
		metaText(rec.Metadata), nowMs()}, append(lifecycleArgs(&rec.Lifecycle), rec.SuspendImage, rec.SuspendHeld, rec.AutoPauseToDisk)...)
	res, err := s.w.ExecContext(ctx, `UPDATE execution_contexts SET state = ?3, reason = ?4, sandbox_id = ?5,
		provider = ?6, template = ?7, last_used_at = MAX(last_used_at, ?8), expires_at = ?9, terminated_at = ?10,
		execution_count = MAX(execution_count, ?11), total_execution_time_ms = MAX(total_execution_time_ms, ?12), last_error = ?13, resource_usage = ?14,
		metadata = ?15, updated_at = ?16, paused_at = ?17, auto_pause_ms = ?18, auto_resume_ms = ?19,
		fixed_expiry = ?20, max_executions = ?21, network = ?22, template_name = ?23, suspend_image = ?24, suspend_held = ?25, auto_pause_disk = ?26
		WHERE id = ?2 AND (state IN ('creating', 'ready') OR state = ?3)`+scopeCond, args...)
	if err != nil {
		return fmt.Errorf("update context %s: %w", rec.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		cur, err := s.Get(ctx, rec.ID)
		if err != nil {
			return err
		}
		return rules.CheckUpdate(rec.ID, cur.State, rec.State)
	}
	return nil
}

// RecordExecution implements contexts.Store.
func (s *Store) RecordExecution(ctx context.Context, id string, n int, dur time.Duration, now, expiresAt time.Time) (*contexts.Record, error) {
	r, err := scanRecord(s.recordStmt.QueryRowContext(ctx, scope(ctx), id, dur.Milliseconds(), ms(now), ms(expiresAt), nowMs(), n), s.box)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.WhyNot(ctx, s.Get, id)
	}
	if err != nil {
		return nil, fmt.Errorf("record execution on %s: %w", id, err)
	}
	return r, nil
}

// Touch implements contexts.Store.
func (s *Store) Touch(ctx context.Context, id string, now, expiresAt time.Time) error {
	res, err := s.touchStmt.ExecContext(ctx, scope(ctx), id, ms(now), ms(expiresAt), nowMs())
	if err != nil {
		return fmt.Errorf("touch %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return rules.WhyNot(ctx, s.Get, id)
	}
	return nil
}

// Terminate implements contexts.Store. The conditional UPDATE makes it a
// compare-and-set: exactly one caller sees a row change.
func (s *Store) Terminate(ctx context.Context, id string, reason contexts.Reason, at time.Time, lastErr string) (bool, error) {
	res, err := s.terminateStmt.ExecContext(ctx, scope(ctx), id, string(rules.FinalState(reason)), string(reason),
		ms(at), lastErr, nowMs())
	if err != nil {
		return false, fmt.Errorf("terminate %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	if _, err := s.Get(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}

func (s *Store) queryRecords(ctx context.Context, q string, args ...any) ([]*contexts.Record, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*contexts.Record
	for rows.Next() {
		r, err := scanRecord(rows, s.box)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ListExpired implements contexts.Store: soonest expiry first, at most
// limit records (limit <= 0: all).
func (s *Store) ListExpired(ctx context.Context, cutoff time.Time, limit int) ([]*contexts.Record, error) {
	if limit <= 0 {
		limit = -1
	}
	out, err := s.queryRecords(ctx, `SELECT `+recordCols+` FROM execution_contexts
		WHERE state IN ('creating', 'ready') AND expires_at <= ?2`+scopeCond+`
		ORDER BY expires_at, id LIMIT ?3`, scope(ctx), ms(cutoff), limit)
	if err != nil {
		return nil, fmt.Errorf("list expired: %w", err)
	}
	return out, nil
}

// ListActive implements contexts.Store, ordered by creation time.
func (s *Store) ListActive(ctx context.Context) ([]*contexts.Record, error) {
	out, err := s.queryRecords(ctx, `SELECT `+recordCols+` FROM execution_contexts
		WHERE state IN ('creating', 'ready')`+scopeCond+` ORDER BY created_at, id`, scope(ctx))
	if err != nil {
		return nil, fmt.Errorf("list active: %w", err)
	}
	return out, nil
}

// CountActive implements contexts.Store.
func (s *Store) CountActive(ctx context.Context, tenantID, userID, conversationID string) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM execution_contexts
		WHERE tenant_id = ?2 AND (?3 = '' OR (conversation_id = ?3 AND user_id = ?4)) AND state IN ('creating', 'ready')`+scopeCond,
		scope(ctx), tenantID, conversationID, userID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count active: %w", err)
	}
	return n, nil
}

// List implements contexts.Store.
func (s *Store) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	var b strings.Builder
	args := []any{scope(ctx)}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("?%d", len(args))
	}
	b.WriteString(`SELECT ` + recordCols + ` FROM execution_contexts WHERE 1 = 1` + scopeCond)
	if f.TenantID != "" {
		b.WriteString(" AND tenant_id = " + arg(f.TenantID))
	}
	if f.UserID != "" || f.ByUser {
		b.WriteString(" AND user_id = " + arg(f.UserID))
	}
	if f.ConversationID != "" {
		b.WriteString(" AND conversation_id = " + arg(f.ConversationID))
	}
	if f.PathID != "" {
		b.WriteString(" AND path_id = " + arg(f.PathID))
	}
	if len(f.States) > 0 {
		ph := make([]string, len(f.States))
		for i, st := range f.States {
			ph[i] = arg(string(st))
		}
		b.WriteString(" AND state IN (" + strings.Join(ph, ", ") + ")")
	}
	for k, v := range f.Metadata {
		b.WriteString(" AND EXISTS (SELECT 1 FROM json_each(metadata) WHERE key = " + arg(k) + " AND value = " + arg(v) + ")")
	}
	if f.After != "" {
		b.WriteString(" AND id > " + arg(f.After))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = rules.DefaultListLimit
	}
	b.WriteString(" ORDER BY id LIMIT " + arg(limit))
	out, err := s.queryRecords(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list contexts: %w", err)
	}
	return out, nil
}
