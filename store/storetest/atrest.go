package storetest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/internal/seal"
	"github.com/sandlot/sandlot/tenant"
)

// AtRest opens one database several times, with a secrets key or none,
// and reads and writes its secret rows behind the store's back.
type AtRest struct {
	// Open opens the database with key (nil: none); the test closes it.
	Open func(t *testing.T, key []byte) (store.Backend, error)
	// Raw returns every stored value column of tenant_secrets, as stored.
	Raw func(t *testing.T) []string
	// PutPlain writes a secret row with a plaintext value, as a store
	// before encryption did.
	PutPlain func(t *testing.T, tenantID, name, value string)
}

// SecretsAtRest: a secret's value is not in the database as given but
// sealed; plaintext rows of an earlier version are sealed at Open and
// still read; another key refuses to open (a clear error, never garbage);
// without a key nothing new is stored and nothing sealed is read.
func SecretsAtRest(t *testing.T, a AtRest) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{0x5a}, seal.KeySize)
	s, err := a.Open(t, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTenant(ctx, &tenant.Tenant{ID: "T", CreatedAt: base}, tenant.HashKey("e2b_kT")); err != nil {
		t.Fatal(err)
	}
	const value = "ghp_AtRestValue0123456789"
	if _, err := s.PutSecret(ctx, "T", secret.Stored{Name: "gh", Secret: secret.Secret{Hosts: []string{"api.github.com"}, Value: value}}); err != nil {
		t.Fatal(err)
	}
	raw := a.Raw(t)
	if len(raw) != 1 || strings.Contains(raw[0], value) || !seal.Sealed(raw[0]) {
		t.Fatalf("stored values %q: want one, sealed", raw)
	}
	a.PutPlain(t, "T", "legacy", "legacy-plain-VALUE")
	s.Close()

	// Reopened with the key: the plaintext row is sealed, both read.
	s, err = a.Open(t, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range a.Raw(t) {
		if !seal.Sealed(r) || strings.Contains(r, "legacy-plain-VALUE") {
			t.Errorf("a value left as given after Open with a key: %q", r)
		}
	}
	got, err := s.GetSecrets(ctx, "T", []string{"gh", "legacy"})
	if err != nil || len(got) != 2 || got[0].Value != value || got[1].Value != "legacy-plain-VALUE" {
		t.Fatalf("get after sealing: %+v %v", got, err)
	}
	s.Close()

	// Another key: Open fails and says why.
	other := bytes.Repeat([]byte{0xa5}, seal.KeySize)
	if s, err := a.Open(t, other); err == nil || !errors.Is(err, seal.ErrWrongKey) || !strings.Contains(err.Error(), "secrets key") {
		if s != nil {
			s.Close()
		}
		t.Errorf("open with another key: %v", err)
	}
	// A key of the wrong size.
	if s, err := a.Open(t, key[:16]); !errors.Is(err, errdefs.ErrInvalidArgument) {
		if s != nil {
			s.Close()
		}
		t.Errorf("open with a 16-byte key: %v", err)
	}

	// No key (tools that never hold secrets, such as `sandlot tenant`):
	// sealed values are not read, new ones not stored.
	s, err = a.Open(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.GetSecrets(ctx, "T", []string{"gh"}); !errors.Is(err, seal.ErrWrongKey) || len(got) != 0 {
		t.Errorf("get without a key: %+v %v", got, err)
	}
	if _, err := s.PutSecret(ctx, "T", secret.Stored{Name: "new", Secret: secret.Secret{Hosts: []string{"x.test"}, Value: "value-new"}}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("put without a key: %v", err)
	}
	if list, err := s.ListSecrets(ctx, "T"); err != nil || len(list) != 2 {
		t.Errorf("list without a key (no values needed): %+v %v", list, err)
	}
}
