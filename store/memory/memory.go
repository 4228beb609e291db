// Package memory is an in-process store: maps behind one mutex. It has the
// same semantics as the SQLite and Postgres stores (store/storetest proves
// it), including tenant scoping from ctx, and loses everything on exit.
package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// Store keeps records, tenants and audit events in memory. It is safe for
// concurrent use.
type Store struct {
	mu        sync.Mutex
	records   map[string]*contexts.Record   // by context id; never handed out
	active    map[contexts.Identity]string  // identity -> id of its active record
	tenants   map[string]*tenant.Tenant     // by tenant id
	keys      map[string]*tenant.Key        // by key hash (keys.go)
	events    []audit.Event                 // ascending ID
	lastEvent int64                         // the last event ID handed out (pruning keeps IDs increasing)
	nodes     map[string]time.Time          // node id -> last heartbeat
	leases    map[string]lease              // by name
	secrets   map[secretKey]secret.Stored   // tenants' secrets
	templates map[string]templates.Template // by template id
	vols      volumeState                   // volumes.go
	snapshots map[string]templates.Snapshot // by template id; a row whose template is gone is gone (snapshots.go)
	closed    bool
}

var (
	_ contexts.Store = (*Store)(nil)
	_ tenant.Store   = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{
		records: map[string]*contexts.Record{},
		active:  map[contexts.Identity]string{},
		tenants: map[string]*tenant.Tenant{},
		keys:    map[string]*tenant.Key{},
		nodes:   map[string]time.Time{},
		leases:  map[string]lease{},
	}
}

func clone(r *contexts.Record) *contexts.Record { return r.Clone() }

func notFound(id string) error { return fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound) }

// lookup returns the stored record id visible to ctx. Precondition: mu held.
func (s *Store) lookup(ctx context.Context, id string) (*contexts.Record, error) {
	if s.closed {
		return nil, fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	r, ok := s.records[id]
	if !ok || !rules.Visible(ctx, r.TenantID) {
		return nil, notFound(id)
	}
	return r, nil
}

// Create implements contexts.Store.
func (s *Store) Create(ctx context.Context, rec *contexts.Record) error {
	if err := rules.PrepareCreate(ctx, rec, time.Now()); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	if id, ok := s.active[rec.Identity]; ok {
		return fmt.Errorf("identity %s/%s/%s has active context %s: %w",
			rec.TenantID, rec.ConversationID, rec.PathID, id, errdefs.ErrAlreadyExists)
	}
	if _, ok := s.records[rec.ID]; ok {
		return fmt.Errorf("context %s: %w", rec.ID, errdefs.ErrAlreadyExists)
	}
	s.records[rec.ID] = clone(rec)
	s.active[rec.Identity] = rec.ID
	return nil
}

// Get implements contexts.Store.
func (s *Store) Get(ctx context.Context, id string) (*contexts.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	return clone(r), nil
}

// GetActive implements contexts.Store.
func (s *Store) GetActive(ctx context.Context, id contexts.Identity) (*contexts.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cid, ok := s.active[id]
	if !ok {
		return nil, fmt.Errorf("active context of %s/%s/%s: %w", id.TenantID, id.ConversationID, id.PathID, errdefs.ErrNotFound)
	}
	r, err := s.lookup(ctx, cid)
	if err != nil {
		return nil, fmt.Errorf("active context of %s/%s/%s: %w", id.TenantID, id.ConversationID, id.PathID, errdefs.ErrNotFound)
	}
	return clone(r), nil
}

// Update implements contexts.Store.
func (s *Store) Update(ctx context.Context, rec *contexts.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(ctx, rec.ID)
	if err != nil {
		return err
	}
	if err := rules.CheckUpdate(rec.ID, r.State, rec.State); err != nil {
		return err
	}
	if err := rules.CheckRecord(rec); err != nil {
		return err
	}
	n := clone(rec)
	// Identity, creation and the create's env are written once, by Create.
	n.Identity, n.CreatedAt, n.Node, n.Env = r.Identity, r.CreatedAt, r.Node, maps.Clone(r.Env)
	rules.Normalize(n)
	// The counters and the last use only grow (contexts.Store.Update).
	n.ExecutionCount = max(n.ExecutionCount, r.ExecutionCount)
	n.TotalExecutionTimeMs = max(n.TotalExecutionTimeMs, r.TotalExecutionTimeMs)
	if r.LastUsedAt.After(n.LastUsedAt) {
		n.LastUsedAt = r.LastUsedAt
	}
	if !n.State.Active() {
		delete(s.active, r.Identity)
	}
	s.records[rec.ID] = n
	return nil
}

// RecordExecution implements contexts.Store.
func (s *Store) RecordExecution(ctx context.Context, id string, n int, dur time.Duration, now, expiresAt time.Time) (*contexts.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if !r.State.Active() {
		return nil, rules.Ended(id, r.State)
	}
	r.ExecutionCount += int64(n)
	r.TotalExecutionTimeMs += dur.Milliseconds()
	r.LastUsedAt, r.ExpiresAt = rules.Time(now), rules.Time(expiresAt)
	return clone(r), nil
}

// Touch implements contexts.Store.
func (s *Store) Touch(ctx context.Context, id string, now, expiresAt time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(ctx, id)
	if err != nil {
		return err
	}
	if !r.State.Active() {
		return rules.Ended(id, r.State)
	}
	r.LastUsedAt, r.ExpiresAt = rules.Time(now), rules.Time(expiresAt)
	return nil
}

// Terminate implements contexts.Store.
func (s *Store) Terminate(ctx context.Context, id string, reason contexts.Reason, at time.Time, lastErr string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(ctx, id)
	if err != nil {
		return false, err
	}
	if !r.State.Active() {
		return false, nil
	}
	at = rules.Time(at)
	r.State, r.Reason, r.TerminatedAt = rules.FinalState(reason), reason, &at
	if lastErr != "" {
		r.LastError = lastErr
	}
	delete(s.active, r.Identity)
	return true, nil
}

// selectActive returns clones of the visible active records matching keep,
// ordered by order. Precondition: mu held.
func (s *Store) selectActive(ctx context.Context, keep func(*contexts.Record) bool) []*contexts.Record {
	var out []*contexts.Record
	for _, id := range s.active {
		r := s.records[id]
		if rules.Visible(ctx, r.TenantID) && keep(r) {
			out = append(out, clone(r))
		}
	}
	return out
}

// ListExpired implements contexts.Store. It returns the records that
// expired first, at most limit of them (limit <= 0: all).
func (s *Store) ListExpired(ctx context.Context, cutoff time.Time, limit int) ([]*contexts.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	cutoff = rules.Time(cutoff)
	out := s.selectActive(ctx, func(r *contexts.Record) bool { return !r.ExpiresAt.After(cutoff) })
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ExpiresAt.Equal(out[j].ExpiresAt) {
			return out[i].ExpiresAt.Before(out[j].ExpiresAt)
		}
		return out[i].ID < out[j].ID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ListActive implements contexts.Store, ordered by creation time.
func (s *Store) ListActive(ctx context.Context) ([]*contexts.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	out := s.selectActive(ctx, func(*contexts.Record) bool { return true })
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// CountActive implements contexts.Store.
func (s *Store) CountActive(ctx context.Context, tenantID, userID, conversationID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	n := 0
	for idn, id := range s.active {
		if idn.TenantID == tenantID && (conversationID == "" || idn.UserID == userID && idn.ConversationID == conversationID) &&
			rules.Visible(ctx, s.records[id].TenantID) {
			n++
		}
	}
	return n, nil
}

// List implements contexts.Store.
func (s *Store) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("memory store closed: %w", errdefs.ErrUnavailable)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = rules.DefaultListLimit
	}
	var out []*contexts.Record
	for _, r := range s.records {
		if match(ctx, r, f) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if len(out) > limit {
		out = out[:limit]
	}
	for i, r := range out {
		out[i] = clone(r)
	}
	return out, nil
}

func match(ctx context.Context, r *contexts.Record, f contexts.Filter) bool {
	switch {
	case !rules.Visible(ctx, r.TenantID),
		f.TenantID != "" && r.TenantID != f.TenantID,
		(f.UserID != "" || f.ByUser) && r.UserID != f.UserID,
		f.ConversationID != "" && r.ConversationID != f.ConversationID,
		f.PathID != "" && r.PathID != f.PathID,
		len(f.States) > 0 && !slices.Contains(f.States, r.State),
		f.After != "" && r.ID <= f.After:
		return false
	}
	for k, v := range f.Metadata {
		if got, ok := r.Metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Close implements contexts.Store. Later calls fail with ErrUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func cloneTenant(t *tenant.Tenant) *tenant.Tenant {
	c := *t
	c.GuardEntities = slices.Clone(t.GuardEntities)
	return &c
}

// CreateTenant implements tenant.Store. It fills t.ID (when empty),
// t.GuardMode (enforce), t.CreatedAt and t.KeyGeneration (1).
func (s *Store) CreateTenant(ctx context.Context, t *tenant.Tenant, keyHash string) error {
	if err := rules.PrepareTenant(t, time.Now()); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tenants[t.ID]; ok {
		return fmt.Errorf("tenant %s: %w", t.ID, errdefs.ErrAlreadyExists)
	}
	if s.nameTaken(t.Name, t.ID) {
		return tenant.NameTaken(t.Name)
	}
	if keyHash != "" {
		if _, ok := s.keys[keyHash]; ok {
			return fmt.Errorf("tenant %s: key hash in use: %w", t.ID, errdefs.ErrAlreadyExists)
		}
		s.keys[keyHash] = &tenant.Key{ID: tenant.NewKeyID(), TenantID: t.ID, Prefix: t.KeyPrefix, CreatedAt: time.Now().UTC()}
	}
	s.tenants[t.ID] = cloneTenant(t)
	return nil
}

// TenantByKeyHash implements tenant.Store.
func (s *Store) TenantByKeyHash(ctx context.Context, keyHash string) (*tenant.Tenant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[keyHash]
	if !ok {
		return nil, fmt.Errorf("key: %w", errdefs.ErrNotFound)
	}
	return cloneTenant(s.tenants[k.TenantID]), nil
}

// GetTenant implements tenant.Store.
func (s *Store) GetTenant(ctx context.Context, id string) (*tenant.Tenant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[id]
	if !ok {
		return nil, fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	return cloneTenant(t), nil
}

// ListTenants implements tenant.Store, ordered by creation time.
func (s *Store) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*tenant.Tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, cloneTenant(t))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// SetKey implements tenant.Store.
func (s *Store) SetKey(ctx context.Context, id, keyHash, keyPrefix string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[id]
	if !ok {
		return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	if k, ok := s.keys[keyHash]; ok && k.TenantID != id {
		return fmt.Errorf("tenant %s: key hash in use: %w", id, errdefs.ErrAlreadyExists)
	}
	s.dropKeys(id)
	s.keys[keyHash] = &tenant.Key{ID: tenant.NewKeyID(), TenantID: id, Prefix: keyPrefix, CreatedAt: time.Now().UTC()}
	t.KeyPrefix = keyPrefix
	t.KeyGeneration++
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
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.tenants[t.ID]
	if !ok {
		return fmt.Errorf("tenant %s: %w", t.ID, errdefs.ErrNotFound)
	}
	if s.nameTaken(t.Name, t.ID) {
		return tenant.NameTaken(t.Name)
	}
	cur.Name, cur.GuardMode, cur.Admin, cur.GuardEntities = t.Name, t.GuardMode, t.Admin, slices.Clone(t.GuardEntities)
	cur.IdleSuspendSeconds = t.IdleSuspendSeconds
	return nil
}

// nameTaken reports whether a tenant other than id is named name (an empty
// name is no name). Precondition: s.mu is held.
func (s *Store) nameTaken(name, id string) bool {
	if name == "" {
		return false
	}
	for _, o := range s.tenants {
		if o.Name == name && o.ID != id {
			return true
		}
	}
	return false
}

// DeleteTenant implements tenant.Store. It removes the tenant and its key;
// its contexts and audit events stay.
func (s *Store) DeleteTenant(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tenants[id]; !ok {
		return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	s.dropKeys(id)
	delete(s.tenants, id)
	s.dropSecrets(id)
	s.dropTemplates(id)
	s.dropVolumes(id)
	return nil
}

// AppendAudit adds ev to the trail.
func (s *Store) AppendAudit(ctx context.Context, ev audit.Event) error {
	return s.AppendAuditBatch(ctx, []audit.Event{ev})
}

// AppendAuditBatch adds evs to the trail in order, all or none.
func (s *Store) AppendAuditBatch(ctx context.Context, evs []audit.Event) error {
	evs, err := rules.PrepareAuditBatch(ctx, evs, time.Now())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs {
		s.lastEvent++
		ev.ID = s.lastEvent
		ev.Detail = maps.Clone(ev.Detail)
		s.events = append(s.events, ev)
	}
	return nil
}

// PruneAudit removes at most limit events whose At is before before,
// first appended first, and returns how many it removed. It is system
// work (the cleanup sweep): a tenant-scoped ctx is refused.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	limit, err := rules.PreparePrune(ctx, limit)
	if err != nil {
		return 0, err
	}
	before = rules.Time(before)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	kept := s.events[:0]
	for _, ev := range s.events {
		if n < limit && ev.At.Before(before) {
			n++
			continue
		}
		kept = append(kept, ev)
	}
	clear(s.events[len(kept):])
	s.events = kept
	return n, nil
}

// ListAudit returns the newest events first, of tenantID or of all tenants
// when it is empty; limit <= 0 means 100.
func (s *Store) ListAudit(ctx context.Context, tenantID string, limit int) ([]audit.Event, error) {
	return s.ListAuditKind(ctx, tenantID, "", limit)
}

// ListAuditKind is ListAudit of the events of kind ("" any).
func (s *Store) ListAuditKind(ctx context.Context, tenantID, kind string, limit int) ([]audit.Event, error) {
	limit = rules.AuditLimit(limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []audit.Event
	for i := len(s.events) - 1; i >= 0 && len(out) < limit; i-- {
		ev := s.events[i]
		if (tenantID == "" || ev.TenantID == tenantID) && (kind == "" || ev.Kind == kind) && rules.Visible(ctx, ev.TenantID) {
			ev.Detail = maps.Clone(ev.Detail)
			out = append(out, ev)
		}
	}
	return out, nil
}

// tenantMissing is the error for a row of a tenant that does not exist.
func tenantMissing(id string) error {
	return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
}
