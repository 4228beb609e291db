package memory

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/internal/rules"
	"github.com/sandlot/sandlot/tenant"
)

var _ tenant.Keys = (*Store)(nil)

// AddKey implements tenant.Keys.
func (s *Store) AddKey(ctx context.Context, k *tenant.Key, keyHash string) error {
	if err := tenant.CheckKeyName(k.Name); err != nil {
		return err
	}
	if !rules.Visible(ctx, k.TenantID) {
		return fmt.Errorf("tenant %s: %w", k.TenantID, errdefs.ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tenants[k.TenantID]; !ok {
		return fmt.Errorf("tenant %s: %w", k.TenantID, errdefs.ErrNotFound)
	}
	if _, ok := s.keys[keyHash]; ok {
		return fmt.Errorf("key hash in use: %w", errdefs.ErrAlreadyExists)
	}
	if len(s.keysOf(k.TenantID)) >= tenant.MaxKeys {
		return tenant.TooManyKeys()
	}
	k.ID, k.CreatedAt, k.LastUsedAt = tenant.NewKeyID(), time.Now().UTC().Truncate(time.Millisecond), nil
	c := *k
	s.keys[keyHash] = &c
	return nil
}

// ListKeys implements tenant.Keys.
func (s *Store) ListKeys(ctx context.Context, tenantID string) ([]*tenant.Key, error) {
	if !rules.Visible(ctx, tenantID) {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*tenant.Key
	for _, k := range s.keysOf(tenantID) {
		c := *k
		if k.LastUsedAt != nil {
			at := *k.LastUsedAt
			c.LastUsedAt = &at
		}
		out = append(out, &c)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// RevokeKey implements tenant.Keys.
func (s *Store) RevokeKey(ctx context.Context, tenantID, id string) (string, error) {
	if !rules.Visible(ctx, tenantID) {
		return "", fmt.Errorf("key %s: %w", id, errdefs.ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := s.keysOf(tenantID)
	for hash, k := range mine {
		if k.ID != id {
			continue
		}
		if len(mine) == 1 {
			return "", tenant.LastKey(id)
		}
		delete(s.keys, hash)
		return hash, nil
	}
	return "", fmt.Errorf("key %s: %w", id, errdefs.ErrNotFound)
}

// KeyUsed implements tenant.Keys.
func (s *Store) KeyUsed(ctx context.Context, keyHash string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.keys[keyHash]; ok {
		at = at.UTC().Truncate(time.Millisecond)
		k.LastUsedAt = &at
	}
	return nil
}

// keysOf returns tenantID's keys by hash. Precondition: s.mu is held.
func (s *Store) keysOf(tenantID string) map[string]*tenant.Key {
	out := map[string]*tenant.Key{}
	for hash, k := range s.keys {
		if k.TenantID == tenantID {
			out[hash] = k
		}
	}
	return out
}

// dropKeys removes tenantID's keys. Precondition: s.mu is held.
func (s *Store) dropKeys(tenantID string) {
	for hash := range s.keysOf(tenantID) {
		delete(s.keys, hash)
	}
}
