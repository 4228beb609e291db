package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/store/internal/seal"
)

const recordCols = `id::text, tenant_id, conversation_id, path_id, state, reason, sandbox_id, provider, template,
	created_at, last_used_at, expires_at, terminated_at, execution_count, total_execution_time_ms,
	last_error, resource_usage, metadata, node,
	paused_at, auto_pause_ms, auto_resume_ms, fixed_expiry, max_executions, network, template_name, user_id, suspend_image, env, suspend_held, auto_pause_disk`

func scanRecord(row pgx.Row, box *seal.Box) (*contexts.Record, error) {
	var (
		r                      contexts.Record
		terminated, paused     *time.Time
		usage, meta, network   []byte
		state, reason          string
		created, used, expires time.Time
		autoPause, autoResume  int64
		env                    string
	)
	err := row.Scan(&r.ID, &r.TenantID, &r.ConversationID, &r.PathID, &state, &reason, &r.SandboxID, &r.Provider,
		&r.Template, &created, &used, &expires, &terminated, &r.ExecutionCount, &r.TotalExecutionTimeMs,
		&r.LastError, &usage, &meta, &r.Node,
		&paused, &autoPause, &autoResume, &r.FixedExpiry, &r.MaxExecutions, &network, &r.TemplateName, &r.UserID, &r.SuspendImage, &env, &r.SuspendHeld, &r.AutoPauseToDisk)
	if err != nil {
		return nil, err
	}
	r.State, r.Reason = contexts.State(state), contexts.Reason(reason)
	r.CreatedAt, r.LastUsedAt, r.ExpiresAt = created.UTC(), used.UTC(), expires.UTC()
	r.TerminatedAt, r.PausedAt = utc(terminated), utc(paused)
	r.AutoPause, r.AutoResume = time.Duration(autoPause)*time.Millisecond, time.Duration(autoResume)*time.Millisecond
	if network != nil {
		r.Network = new(policy.Policy)
		if err := json.Unmarshal(network, r.Network); err != nil {
			return nil, fmt.Errorf("context %s: network: %w", r.ID, err)
		}
	}
	if err := json.Unmarshal(usage, &r.ResourceUsage); err != nil {
		return nil, fmt.Errorf("context %s: resource_usage: %w", r.ID, err)
	}
	if err := json.Unmarshal(meta, &r.Metadata); err != nil {
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

func collectRecords(box *seal.Box, rows pgx.Rows, err error) ([]*contexts.Record, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*contexts.Record
	for rows.Next() {
		r, err := scanRecord(rows, box)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only string maps and plain structs reach here
	}
	return string(b)
}

func mapText(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	return jsonText(m)
}

func tp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := rules.Time(*t)
	return &v
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

// networkText is the network column's value: the policy's JSON, or NULL.
func networkText(p *policy.Policy) *string {
	if p == nil {
		return nil
	}
	s := jsonText(p)
	return &s
}

// lifecycleArgs are the values of the lifecycle columns, in recordCols
// order.
func lifecycleArgs(l *contexts.Lifecycle) []any {
	return []any{tp(l.PausedAt), l.AutoPause.Milliseconds(), l.AutoResume.Milliseconds(), l.FixedExpiry,
		l.MaxExecutions, networkText(l.Network), l.TemplateName}
}

// lifecycleSet assigns the lifecycle columns from the arguments starting
// at $n, in lifecycleArgs order.
func lifecycleSet(n int) string {
	return fmt.Sprintf(`paused_at = $%d, auto_pause_ms = $%d, auto_resume_ms = $%d, fixed_expiry = $%d,
		max_executions = $%d, network = $%d::jsonb, template_name = $%d`, n, n+1, n+2, n+3, n+4, n+5, n+6)
}

// pgCode returns the SQLSTATE of err, if it is a Postgres error.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// mapErr turns constraint and privilege failures into categories.
func mapErr(err error, what string) error {
	switch pgCode(err) {
	case "":
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w", what, err)
		}
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) {
			return fmt.Errorf("%s: %w: %w", what, errdefs.ErrUnavailable, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	case "23505":
		return fmt.Errorf("%s: %w", what, errdefs.ErrAlreadyExists)
	case "42501":
		return fmt.Errorf("%s: %w", what, errdefs.ErrPermissionDenied)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func notFound(id string) error { return fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound) }

// validID reports whether id can name a row; anything else is simply not found.
func validID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil
}

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
		rec.Provider, rec.Template, rec.CreatedAt, rec.LastUsedAt, rec.ExpiresAt, rec.TerminatedAt,
		rec.ExecutionCount, rec.TotalExecutionTimeMs, rec.LastError, jsonText(rec.ResourceUsage), mapText(rec.Metadata), rec.Node},
		append(lifecycleArgs(&rec.Lifecycle), rec.UserID, rec.SuspendImage, env, rec.SuspendHeld, rec.AutoPauseToDisk)...)
	err = s.run(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `INSERT INTO execution_contexts (`+strings.ReplaceAll(recordCols, "id::text", "id")+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17::jsonb, $18::jsonb, $19,
			$20, $21, $22, $23, $24, $25::jsonb, $26, $27, $28, $29, $30, $31)`, args...)
		return err
	})
	if err != nil {
		return mapErr(err, fmt.Sprintf("create context %s for %s/%s/%s", rec.ID, rec.TenantID, rec.ConversationID, rec.PathID))
	}
	return nil
}

// Get implements contexts.Store.
func (s *Store) Get(ctx context.Context, id string) (*contexts.Record, error) {
	if !validID(id) {
		return nil, notFound(id)
	}
	var r *contexts.Record
	err := s.run(ctx, func(q querier) error {
		var err error
		r, err = scanRecord(q.QueryRow(ctx, `SELECT `+recordCols+` FROM execution_contexts WHERE id = $1`, id), s.box)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, mapErr(err, "get context "+id)
	}
	return r, nil
}

// GetActive implements contexts.Store.
func (s *Store) GetActive(ctx context.Context, id contexts.Identity) (*contexts.Record, error) {
	var r *contexts.Record
	err := s.run(ctx, func(q querier) error {
		var err error
		r, err = scanRecord(q.QueryRow(ctx, `SELECT `+recordCols+` FROM execution_contexts
			WHERE tenant_id = $1 AND conversation_id = $2 AND path_id = $3 AND user_id = $4 AND state IN ('creating', 'ready')`,
			id.TenantID, id.ConversationID, id.PathID, id.UserID), s.box)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("active context of %s/%s/%s: %w", id.TenantID, id.ConversationID, id.PathID, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr(err, "get active context")
	}
	return r, nil
}

// Update implements contexts.Store. The state guard is in the WHERE
// clause, so a concurrent Terminate cannot be undone by a stale Update.
func (s *Store) Update(ctx context.Context, rec *contexts.Record) error {
	if err := rules.CheckUpdate(rec.ID, contexts.StateReady, rec.State); err != nil {
		return err
	}
	if err := rules.CheckRecord(rec); err != nil {
		return err
	}
	if !validID(rec.ID) {
		return notFound(rec.ID)
	}
	args := append([]any{rec.ID, string(rec.State), string(rec.Reason), rec.SandboxID, rec.Provider, rec.Template,
		rules.Time(rec.LastUsedAt), rules.Time(rec.ExpiresAt), tp(rec.TerminatedAt),
		rec.ExecutionCount, rec.TotalExecutionTimeMs, rec.LastError, jsonText(rec.ResourceUsage), mapText(rec.Metadata)},
		append(lifecycleArgs(&rec.Lifecycle), rec.SuspendImage, rec.SuspendHeld, rec.AutoPauseToDisk)...)
	var n int64
	err := s.run(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, `UPDATE execution_contexts SET state = $2, reason = $3, sandbox_id = $4,
			provider = $5, template = $6, last_used_at = GREATEST(last_used_at, $7), expires_at = $8, terminated_at = $9,
			execution_count = GREATEST(execution_count, $10), total_execution_time_ms = GREATEST(total_execution_time_ms, $11), last_error = $12, resource_usage = $13::jsonb,
			metadata = $14::jsonb, `+lifecycleSet(15)+`, suspend_image = $22, suspend_held = $23, auto_pause_disk = $24
			WHERE id = $1 AND (state IN ('creating', 'ready') OR state = $2)`, args...)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "update context "+rec.ID)
	}
	if n == 0 {
		cur, err := s.Get(ctx, rec.ID)
		if err != nil {
			return err
		}
		return rules.CheckUpdate(rec.ID, cur.State, rec.State)
	}
	return nil
}

// RecordExecution implements contexts.Store: one UPDATE ... RETURNING, so
// concurrent calls serialize on the row lock and none is lost.
func (s *Store) RecordExecution(ctx context.Context, id string, n int, dur time.Duration, now, expiresAt time.Time) (*contexts.Record, error) {
	if !validID(id) {
		return nil, notFound(id)
	}
	var r *contexts.Record
	err := s.run(ctx, func(q querier) error {
		var err error
		r, err = scanRecord(q.QueryRow(ctx, `UPDATE execution_contexts SET execution_count = execution_count + $5,
			total_execution_time_ms = total_execution_time_ms + $2, last_used_at = $3, expires_at = $4
			WHERE id = $1 AND state IN ('creating', 'ready') RETURNING `+recordCols,
			id, dur.Milliseconds(), rules.Time(now), rules.Time(expiresAt), n), s.box)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, rules.WhyNot(ctx, s.Get, id)
	}
	if err != nil {
		return nil, mapErr(err, "record execution on "+id)
	}
	return r, nil
}

// Touch implements contexts.Store.
func (s *Store) Touch(ctx context.Context, id string, now, expiresAt time.Time) error {
	if !validID(id) {
		return notFound(id)
	}
	var n int64
	err := s.run(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, `UPDATE execution_contexts SET last_used_at = $2, expires_at = $3
			WHERE id = $1 AND state IN ('creating', 'ready')`, id, rules.Time(now), rules.Time(expiresAt))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "touch "+id)
	}
	if n == 0 {
		return rules.WhyNot(ctx, s.Get, id)
	}
	return nil
}

// Terminate implements contexts.Store. It is a compare-and-set on the
// state: a second caller blocks on the row lock, re-evaluates the WHERE
// clause against the committed row, finds it ended and changes nothing, so
// exactly one caller, on any daemon, gets true and owns the teardown.
func (s *Store) Terminate(ctx context.Context, id string, reason contexts.Reason, at time.Time, lastErr string) (bool, error) {
	if !validID(id) {
		return false, notFound(id)
	}
	var n int64
	err := s.run(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, `UPDATE execution_contexts SET state = $2, reason = $3, terminated_at = $4,
			last_error = CASE WHEN $5 = '' THEN last_error ELSE $5 END
			WHERE id = $1 AND state IN ('creating', 'ready')`,
			id, string(rules.FinalState(reason)), string(reason), rules.Time(at), lastErr)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return false, mapErr(err, "terminate "+id)
	}
	if n == 1 {
		return true, nil
	}
	if _, err := s.Get(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}

func (s *Store) list(ctx context.Context, what, sql string, args ...any) ([]*contexts.Record, error) {
	var out []*contexts.Record
	err := s.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, sql, args...)
		out, err = collectRecords(s.box, rows, err)
		return err
	})
	if err != nil {
		return nil, mapErr(err, what)
	}
	return out, nil
}

// ListExpired implements contexts.Store: soonest expiry first, at most
// limit records (limit <= 0: all). It is the schema's
// get_expired_execution_contexts (migration 9) with the manager's clock
// for cutoff; the planner inlines the function, so the query is the same.
func (s *Store) ListExpired(ctx context.Context, cutoff time.Time, limit int) ([]*contexts.Record, error) {
	return s.list(ctx, "list expired", `SELECT `+recordCols+` FROM get_expired_execution_contexts($1, $2)`,
		limit, rules.Time(cutoff))
}

// ListActive implements contexts.Store, ordered by creation time.
func (s *Store) ListActive(ctx context.Context) ([]*contexts.Record, error) {
	return s.list(ctx, "list active", `SELECT `+recordCols+` FROM execution_contexts
		WHERE state IN ('creating', 'ready') ORDER BY created_at, id`)
}

// CountActive implements contexts.Store.
func (s *Store) CountActive(ctx context.Context, tenantID, userID, conversationID string) (int, error) {
	var n int
	err := s.run(ctx, func(q querier) error {
		return q.QueryRow(ctx, `SELECT COUNT(*) FROM execution_contexts
			WHERE tenant_id = $1 AND ($2 = '' OR (conversation_id = $2 AND user_id = $3)) AND state IN ('creating', 'ready')`,
			tenantID, conversationID, userID).Scan(&n)
	})
	if err != nil {
		return 0, mapErr(err, "count active")
	}
	return n, nil
}

// List implements contexts.Store.
func (s *Store) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	var b strings.Builder
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	b.WriteString(`SELECT ` + recordCols + ` FROM execution_contexts WHERE true`)
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
		st := make([]string, len(f.States))
		for i, v := range f.States {
			st[i] = string(v)
		}
		b.WriteString(" AND state = ANY(" + arg(st) + "::text[])")
	}
	if len(f.Metadata) > 0 {
		b.WriteString(" AND metadata @> " + arg(jsonText(f.Metadata)) + "::jsonb")
	}
	if f.After != "" {
		if validID(f.After) {
			b.WriteString(" AND id > " + arg(f.After) + "::uuid")
		} else {
			b.WriteString(" AND id::text > " + arg(f.After))
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = rules.DefaultListLimit
	}
	b.WriteString(" ORDER BY id LIMIT " + arg(limit))
	return s.list(ctx, "list contexts", b.String(), args...)
}
