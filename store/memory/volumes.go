package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/volumes"
)

var _ volumes.Store = (*Store)(nil)

// volumeState is the store's volumes: records by id, and the contexts
// that mount each.
type volumeState struct {
	byID   map[string]volumes.Volume
	mounts map[string]map[string]volumes.Mount // volume id -> context id -> mount
}

// CreateVolume implements volumes.Store.
func (s *Store) CreateVolume(ctx context.Context, v volumes.Volume) (volumes.Volume, error) {
	if err := rules.PrepareVolume(ctx, &v, time.Now()); err != nil {
		return volumes.Volume{}, err
	}
	v.CreatedAt = rules.Time(v.CreatedAt)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tenants[v.TenantID]; !ok {
		return volumes.Volume{}, tenantMissing(v.TenantID)
	}
	for _, o := range s.vols.byID {
		if o.ID == v.ID || o.TenantID == v.TenantID && o.Name == v.Name {
			return volumes.Volume{}, fmt.Errorf("volume %q: %w", v.Name, errdefs.ErrAlreadyExists)
		}
	}
	if s.vols.byID == nil {
		s.vols.byID = map[string]volumes.Volume{}
		s.vols.mounts = map[string]map[string]volumes.Mount{}
	}
	s.vols.byID[v.ID] = v
	return v, nil
}

// getVolume finds tenantID's volume ref. Precondition: s.mu is held.
func (s *Store) getVolume(ctx context.Context, tenantID, ref string) (volumes.Volume, error) {
	if !rules.Visible(ctx, tenantID) || tenantID == "" {
		return volumes.Volume{}, volumes.NotFound(ref)
	}
	var rows []volumes.Volume
	for _, v := range s.vols.byID {
		if v.TenantID == tenantID && (v.Name == ref || v.ID == ref) {
			rows = append(rows, v)
		}
	}
	return rules.PickVolume(rows, ref)
}

// GetVolume implements volumes.Store.
func (s *Store) GetVolume(ctx context.Context, tenantID, ref string) (volumes.Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getVolume(ctx, tenantID, ref)
}

// ListVolumes implements volumes.Store.
func (s *Store) ListVolumes(ctx context.Context, tenantID string) ([]volumes.Volume, error) {
	if err := rules.CheckVolumeList(ctx, tenantID); err != nil {
		return nil, err
	}
	if !rules.Visible(ctx, tenantID) {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []volumes.Volume
	for _, v := range s.vols.byID {
		if tenantID == "" || v.TenantID == tenantID {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b volumes.Volume) int {
		if c := strings.Compare(a.TenantID, b.TenantID); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// AttachVolume implements volumes.Store.
func (s *Store) AttachVolume(ctx context.Context, tenantID, contextID string, m volumes.Mount) error {
	id := m.VolumeID
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.getVolume(ctx, tenantID, id)
	if err != nil || v.ID != id {
		return volumes.NotFound(id)
	}
	if s.vols.mounts[id] == nil {
		s.vols.mounts[id] = map[string]volumes.Mount{}
	}
	if _, ok := s.vols.mounts[id][contextID]; !ok {
		s.vols.mounts[id][contextID] = m
	}
	return nil
}

// ContextVolumes implements volumes.Store.
func (s *Store) ContextVolumes(ctx context.Context, tenantID, contextID string) ([]volumes.Mount, error) {
	if !rules.Visible(ctx, tenantID) || tenantID == "" {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []volumes.Mount
	for id, byCtx := range s.vols.mounts {
		if m, ok := byCtx[contextID]; ok && s.vols.byID[id].TenantID == tenantID {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b volumes.Mount) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// volumeUsers lists the live contexts mounting id. Precondition: s.mu is
// held.
func (s *Store) volumeUsers(id string) []string {
	var out []string
	for c := range s.vols.mounts[id] {
		if r, ok := s.records[c]; ok && (r.State == contexts.StateCreating || r.State == contexts.StateReady) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// VolumeUsers implements volumes.Store.
func (s *Store) VolumeUsers(ctx context.Context, tenantID, id string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.getVolume(ctx, tenantID, id)
	if err != nil || v.ID != id {
		return nil, volumes.NotFound(id)
	}
	return s.volumeUsers(id), nil
}

// DeleteVolume implements volumes.Store.
func (s *Store) DeleteVolume(ctx context.Context, tenantID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.getVolume(ctx, tenantID, id)
	if err != nil || v.ID != id {
		return volumes.NotFound(id)
	}
	if len(s.volumeUsers(id)) > 0 {
		return volumes.InUse(id)
	}
	delete(s.vols.byID, id)
	delete(s.vols.mounts, id)
	return nil
}

// dropVolumes forgets tenantID's volumes (the tenant was deleted).
// Precondition: s.mu is held.
func (s *Store) dropVolumes(tenantID string) {
	for id, v := range s.vols.byID {
		if v.TenantID == tenantID {
			delete(s.vols.byID, id)
			delete(s.vols.mounts, id)
		}
	}
}
