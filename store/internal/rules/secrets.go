package rules

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/network/secret"
)

// PrepareSecret validates a secret about to be put for tenantID and fills
// its ID (random, when new; keep is the ID of the secret it replaces) and
// times.
func PrepareSecret(ctx context.Context, tenantID string, s *secret.Stored, keep string, created time.Time, now time.Time) error {
	if err := CheckTenant(ctx, tenantID); err != nil {
		return err
	}
	if err := policy.CheckSecretName(s.Name); err != nil {
		return err
	}
	if err := checkEnvName(s.Env); err != nil {
		return err
	}
	if keep != "" {
		s.ID = keep
	} else {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		s.ID = hex.EncodeToString(b[:])
	}
	if err := s.Secret.Validate(); err != nil {
		return err
	}
	if created.IsZero() {
		created = now
	}
	s.CreatedAt, s.UpdatedAt = Time(created), Time(now)
	return nil
}

// checkEnvName accepts "" or a portable environment variable name.
func checkEnvName(n string) error {
	if n == "" {
		return nil
	}
	if len(n) > 128 {
		return fmt.Errorf("environment variable name of %d characters: %w", len(n), errdefs.ErrInvalidArgument)
	}
	for i, c := range n {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("environment variable name %q: letters, digits and '_', not starting with a digit: %w", n, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// SecretNotFound is the error for a name tenantID has no secret of.
func SecretNotFound(name string) error {
	return fmt.Errorf("secret %q: %w", name, errdefs.ErrNotFound)
}

// PickSecrets returns the secrets of all named by names, in names' order,
// or SecretNotFound for the first name all lacks. nil names: all.
func PickSecrets(all []secret.Stored, names []string) ([]secret.Stored, error) {
	if names == nil {
		return all, nil
	}
	byName := make(map[string]secret.Stored, len(all))
	for _, sec := range all {
		byName[sec.Name] = sec
	}
	out := make([]secret.Stored, 0, len(names))
	for _, n := range names {
		sec, ok := byName[n]
		if !ok {
			return nil, SecretNotFound(n)
		}
		out = append(out, sec)
	}
	return out, nil
}
