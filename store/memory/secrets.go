package memory

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/store/internal/rules"
)

type secretKey struct{ tenant, name string }

func cloneSecret(s secret.Stored) secret.Stored {
	s.Hosts = slices.Clone(s.Hosts)
	return s
}

// PutSecret implements secret.Store.
func (s *Store) PutSecret(ctx context.Context, tenantID string, sec secret.Stored) (secret.Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.secrets == nil {
		s.secrets = map[secretKey]secret.Stored{}
	}
	old, replaced := s.secrets[secretKey{tenantID, sec.Name}]
	if err := rules.PrepareSecret(ctx, tenantID, &sec, old.ID, old.CreatedAt, time.Now()); err != nil {
		return secret.Stored{}, err
	}
	if _, ok := s.tenants[tenantID]; !ok && !replaced {
		return secret.Stored{}, tenantMissing(tenantID)
	}
	s.secrets[secretKey{tenantID, sec.Name}] = cloneSecret(sec)
	return cloneSecret(sec), nil
}

// GetSecrets implements secret.Store.
func (s *Store) GetSecrets(ctx context.Context, tenantID string, names []string) ([]secret.Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !rules.Visible(ctx, tenantID) {
		if len(names) > 0 {
			return nil, rules.SecretNotFound(names[0])
		}
		return nil, nil
	}
	if names == nil {
		return s.list(tenantID, true), nil
	}
	out := make([]secret.Stored, 0, len(names))
	for _, n := range names {
		sec, ok := s.secrets[secretKey{tenantID, n}]
		if !ok {
			return nil, rules.SecretNotFound(n)
		}
		out = append(out, cloneSecret(sec))
	}
	return out, nil
}

// ListSecrets implements secret.Store.
func (s *Store) ListSecrets(ctx context.Context, tenantID string) ([]secret.Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !rules.Visible(ctx, tenantID) {
		return nil, nil
	}
	return s.list(tenantID, false), nil
}

func (s *Store) list(tenantID string, values bool) []secret.Stored {
	var out []secret.Stored
	for k, sec := range s.secrets {
		if k.tenant == tenantID {
			if !values {
				sec.Value = ""
			}
			out = append(out, cloneSecret(sec))
		}
	}
	slices.SortFunc(out, func(a, b secret.Stored) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// DeleteSecret implements secret.Store.
func (s *Store) DeleteSecret(ctx context.Context, tenantID, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := secretKey{tenantID, name}
	if _, ok := s.secrets[k]; !ok || !rules.Visible(ctx, tenantID) {
		return rules.SecretNotFound(name)
	}
	delete(s.secrets, k)
	return nil
}

// dropSecrets forgets tenantID's secrets (the tenant was deleted).
func (s *Store) dropSecrets(tenantID string) {
	for k := range s.secrets {
		if k.tenant == tenantID {
			delete(s.secrets, k)
		}
	}
}
