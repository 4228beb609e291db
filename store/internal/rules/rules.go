// Package rules holds the record rules every store applies the same way,
// so that the conformance suite can hold them all to one behaviour.
package rules

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/tenant"
)

// DefaultListLimit is the page size of List and ListAudit when none is given.
const DefaultListLimit = 100

// Time truncates t to the stored precision (milliseconds, UTC). The zero
// time stays zero.
func Time(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

// PrepareCreate validates rec for Create and fills its defaults in place:
// a new UUID when ID is empty (a given ID must be a UUID), state creating when State is empty,
// CreatedAt/LastUsedAt of now when zero, and times truncated.
func PrepareCreate(ctx context.Context, rec *contexts.Record, now time.Time) error {
	if rec.TenantID == "" || rec.ConversationID == "" || rec.PathID == "" {
		return fmt.Errorf("create context: identity %+v is incomplete: %w", rec.Identity, errdefs.ErrInvalidArgument)
	}
	if rec.State == "" {
		rec.State = contexts.StateCreating
	}
	if !rec.State.Active() {
		return fmt.Errorf("create context: state %q is not active: %w", rec.State, errdefs.ErrInvalidArgument)
	}
	if err := CheckTenant(ctx, rec.TenantID); err != nil {
		return err
	}
	if err := CheckRecord(rec); err != nil {
		return err
	}
	if rec.ID == "" {
		rec.ID = uuid.NewString()
	} else if u, err := uuid.Parse(rec.ID); err != nil || len(rec.ID) != 36 {
		return fmt.Errorf("create context: id %q is not a UUID: %w", rec.ID, errdefs.ErrInvalidArgument)
	} else {
		rec.ID = u.String() // canonical lower case: IDs order the same in every store
	}
	now = Time(now)
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	if rec.LastUsedAt.IsZero() {
		rec.LastUsedAt = rec.CreatedAt
	}
	Normalize(rec)
	return nil
}

// Normalize truncates rec's times and durations to milliseconds and turns
// an empty metadata map into nil, the form every store returns.
func Normalize(rec *contexts.Record) {
	rec.CreatedAt = Time(rec.CreatedAt)
	rec.LastUsedAt = Time(rec.LastUsedAt)
	rec.ExpiresAt = Time(rec.ExpiresAt)
	rec.TerminatedAt = timePtr(rec.TerminatedAt)
	rec.PausedAt = timePtr(rec.PausedAt)
	rec.AutoPause = rec.AutoPause.Truncate(time.Millisecond)
	rec.AutoResume = rec.AutoResume.Truncate(time.Millisecond)
	if len(rec.Metadata) == 0 {
		rec.Metadata = nil
	}
}

// timePtr is a copy of *t at the stored precision; nil stays nil.
func timePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

// CheckRecord refuses a record a store must not keep: metadata holding a
// key under contexts.ReservedPrefix (the manager refuses it from callers;
// a store holds every writer to it) and negative lifecycle durations.
func CheckRecord(rec *contexts.Record) error {
	if err := contexts.CheckMetadata(rec.Metadata); err != nil {
		return fmt.Errorf("context %s: %w", rec.ID, err)
	}
	if rec.AutoPause < 0 || rec.AutoResume < 0 {
		return fmt.Errorf("context %s: negative autoPause or autoResume: %w", rec.ID, errdefs.ErrInvalidArgument)
	}
	return nil
}

// CheckUpdate reports whether a record in state from may be saved with
// state to: to must be a known state, and nothing leaves a final state.
func CheckUpdate(id string, from, to contexts.State) error {
	switch to {
	case contexts.StateCreating, contexts.StateReady, contexts.StateTerminated, contexts.StateError:
	default:
		return fmt.Errorf("context %s: unknown state %q: %w", id, to, errdefs.ErrInvalidArgument)
	}
	if !from.Active() && from != to {
		return fmt.Errorf("context %s is %s and cannot become %s: %w", id, from, to, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// CheckTenant rejects writing a row of tenantID when ctx is scoped to
// another tenant.
func CheckTenant(ctx context.Context, tenantID string) error {
	if scope, ok := tenant.FromContext(ctx); ok && scope != tenantID {
		return fmt.Errorf("tenant %s may not write rows of tenant %s: %w", scope, tenantID, errdefs.ErrPermissionDenied)
	}
	return nil
}

// Visible reports whether a row of tenantID is visible to ctx.
func Visible(ctx context.Context, tenantID string) bool {
	scope, ok := tenant.FromContext(ctx)
	return !ok || scope == tenantID
}

// FinalState is the state Terminate moves a record to for reason.
func FinalState(reason contexts.Reason) contexts.State {
	if reason == contexts.ReasonError {
		return contexts.StateError
	}
	return contexts.StateTerminated
}

// PrepareTenant validates t for CreateTenant and fills its defaults.
func PrepareTenant(t *tenant.Tenant, now time.Time) error {
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
	if t.GuardMode == "" {
		t.GuardMode = tenant.GuardEnforce
	}
	if err := CheckGuardMode(t.GuardMode); err != nil {
		return err
	}
	if err := CheckGuardEntities(t.GuardEntities); err != nil {
		return err
	}
	if err := CheckIdleSuspend(t.IdleSuspendSeconds); err != nil {
		return err
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	t.CreatedAt = Time(t.CreatedAt)
	t.KeyGeneration = 1
	return nil
}

// CheckGuardMode rejects an unknown guard mode.
func CheckGuardMode(m string) error {
	switch m {
	case tenant.GuardOff, tenant.GuardReport, tenant.GuardEnforce:
		return nil
	}
	return fmt.Errorf("guard mode %q: %w", m, errdefs.ErrInvalidArgument)
}

// CheckGuardEntities rejects an entity type the guard does not know.
func CheckGuardEntities(types []string) error {
	for _, e := range types {
		if !slices.Contains(tenant.GuardEntityTypes, e) {
			return fmt.Errorf("guard entity type %q: %w", e, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// PrepareAudit validates ev for AppendAudit and fills its defaults.
func PrepareAudit(ctx context.Context, ev *audit.Event, now time.Time) error {
	if ev.Kind == "" {
		return fmt.Errorf("audit event without kind: %w", errdefs.ErrInvalidArgument)
	}
	if err := CheckTenant(ctx, ev.TenantID); err != nil {
		return err
	}
	if ev.At.IsZero() {
		ev.At = now
	}
	ev.At = Time(ev.At)
	if len(ev.Detail) == 0 {
		ev.Detail = nil
	}
	return nil
}

// PrepareAuditBatch returns a copy of a batch with every event prepared
// (PrepareAudit); the batch is refused whole when one is bad.
func PrepareAuditBatch(ctx context.Context, evs []audit.Event, now time.Time) ([]audit.Event, error) {
	out := make([]audit.Event, len(evs))
	for i, ev := range evs {
		if err := PrepareAudit(ctx, &ev, now); err != nil {
			return nil, err
		}
		out[i] = ev
	}
	return out, nil
}

// MaxPrune bounds the events one PruneAudit removes, so one sweep of a
// large trail never holds a long transaction; the caller calls again.
const MaxPrune = 10000

// PreparePrune checks a PruneAudit call: it is system work (the cleanup
// sweep), refused to a tenant-scoped ctx, and removes at most MaxPrune
// events (limit <= 0 or above: MaxPrune).
func PreparePrune(ctx context.Context, limit int) (int, error) {
	if id, ok := tenant.FromContext(ctx); ok {
		return 0, fmt.Errorf("tenant %s may not remove audit events: %w", id, errdefs.ErrPermissionDenied)
	}
	if limit <= 0 || limit > MaxPrune {
		limit = MaxPrune
	}
	return limit, nil
}

// AuditLimit applies the default page size.
func AuditLimit(limit int) int {
	if limit <= 0 {
		return DefaultListLimit
	}
	return limit
}

// MaxNodeLen bounds a node id.
const MaxNodeLen = 128

// CheckNode rejects an empty or over-long node id (Heartbeat, Claim's
// target).
func CheckNode(node string) error {
	if node == "" || len(node) > MaxNodeLen {
		return fmt.Errorf("node id %q must be 1 to %d bytes: %w", node, MaxNodeLen, errdefs.ErrInvalidArgument)
	}
	return nil
}

// Ended is the error of a write that needs an active record when record id
// is in state.
func Ended(id string, state contexts.State) error {
	return fmt.Errorf("context %s is %s: %w", id, state, errdefs.ErrFailedPrecondition)
}

// WhyNot explains why a conditional write on the active record id changed
// no row: get's error when the record is absent (or invisible), else that it
// has ended.
func WhyNot(ctx context.Context, get func(context.Context, string) (*contexts.Record, error), id string) error {
	r, err := get(ctx, id)
	if err != nil {
		return err
	}
	return Ended(id, r.State)
}

// MaxLeaseNameLen bounds a lease's name (AcquireLease).
const MaxLeaseNameLen = 128

// CheckLease rejects a lease request without a name or a holder, or for
// no time (AcquireLease, ReleaseLease with ttl 1).
func CheckLease(name, holder string, ttl time.Duration) error {
	if name == "" || len(name) > MaxLeaseNameLen {
		return fmt.Errorf("lease name %q must be 1 to %d bytes: %w", name, MaxLeaseNameLen, errdefs.ErrInvalidArgument)
	}
	if err := CheckNode(holder); err != nil {
		return fmt.Errorf("lease %s: holder: %w", name, err)
	}
	if ttl <= 0 {
		return fmt.Errorf("lease %s: ttl %v must be positive: %w", name, ttl, errdefs.ErrInvalidArgument)
	}
	return nil
}

// CheckIdleSuspend refuses a negative idle suspend setting of a tenant's.
func CheckIdleSuspend(seconds int64) error {
	if seconds < 0 {
		return fmt.Errorf("idle suspend of %d s: want 0 (none) or more: %w", seconds, errdefs.ErrInvalidArgument)
	}
	return nil
}
