package memory

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/templates"
)

var _ templates.SnapshotStore = (*Store)(nil)

// CreateSnapshot implements templates.SnapshotStore.
func (s *Store) CreateSnapshot(ctx context.Context, sn templates.Snapshot) error {
	if err := rules.PrepareSnapshot(ctx, &sn, time.Now()); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.templates[sn.ID]; !ok || t.TenantID != sn.TenantID {
		return rules.SnapshotTemplateMissing(sn)
	}
	if s.snapshots == nil {
		s.snapshots = map[string]templates.Snapshot{}
	}
	s.pruneSnapshots()
	s.snapshots[sn.ID] = sn
	return nil
}

// pruneSnapshots drops the rows whose template is gone, as the SQL
// stores' cascade does. Precondition: s.mu is held.
func (s *Store) pruneSnapshots() {
	for id := range s.snapshots {
		if _, ok := s.templates[id]; !ok {
			delete(s.snapshots, id)
		}
	}
}

// ListSnapshots implements templates.SnapshotStore.
func (s *Store) ListSnapshots(ctx context.Context, tenantID, contextID string) ([]templates.Snapshot, error) {
	if !rules.Visible(ctx, tenantID) {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneSnapshots()
	var out []templates.Snapshot
	for _, sn := range s.snapshots {
		if sn.TenantID == tenantID && (contextID == "" || sn.ContextID == contextID) {
			out = append(out, sn)
		}
	}
	slices.SortFunc(out, func(a, b templates.Snapshot) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// ForkSnapshots implements templates.SnapshotStore.
func (s *Store) ForkSnapshots(ctx context.Context, before time.Time, limit int) ([]templates.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneSnapshots()
	var out []templates.Snapshot
	for _, sn := range s.snapshots {
		if sn.Fork && sn.CreatedAt.Before(before) && rules.Visible(ctx, sn.TenantID) {
			out = append(out, sn)
		}
	}
	slices.SortFunc(out, func(a, b templates.Snapshot) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
