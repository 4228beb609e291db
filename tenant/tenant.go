// Package tenant holds tenants, their API keys, the one Authenticator that
// every edge (/v1, MCP, E2B) resolves credentials with, and the one context
// key that carries a request's tenant: stores read its id for row-level
// security, the guard reads its mode.
//
// Keys are shaped "e2b_<40 hex>" so the E2B SDKs accept them; only their
// SHA-256 is stored.
package tenant

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// Guard modes.
const (
	GuardOff     = "off"
	GuardReport  = "report"
	GuardEnforce = "enforce"
)

// Tenant owns API keys and contexts.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	GuardMode string    `json:"guardMode"` // off | report | enforce (default)
	Admin     bool      `json:"admin"`     // may override guard mode per request, read every tenant's session metrics
	CreatedAt time.Time `json:"createdAt"`
	KeyPrefix string    `json:"keyPrefix"` // first characters of the key, for display
	// KeyGeneration counts the tenant's keys: 1 at creation, one more at
	// every SetKey. Tokens the daemon signs for a tenant (E2B access
	// tokens) name the generation, so rotating the key revokes them.
	KeyGeneration int64 `json:"keyGeneration"`
	// GuardEntities are the entity types (GuardEntityTypes) the egress
	// guard finds in the tenant's output: nil, the daemon's default
	// (serve --guard-entities); empty, none (the patterns alone).
	GuardEntities []string `json:"guardEntities,omitempty"`
	// IdleSuspendSeconds suspends the tenant's idle contexts to disk after
	// that many seconds without a call; the smallest of the daemon's
	// (serve --idle-suspend), the template's and the tenant's wins. 0: no
	// setting of the tenant's.
	IdleSuspendSeconds int64 `json:"idleSuspendSeconds,omitempty"`
}

// GuardEntityTypes are the entity types a tenant may choose (the guard's
// EntityTypes: TestEntityTypesMatchTenant).
var GuardEntityTypes = []string{"PERSON", "ADDRESS", "ORGANIZATION", "LOCATION", "DATE_OF_BIRTH"}

// EncodeEntities is GuardEntities as a store column: NULL for nil, else
// the types joined by commas ("" for none).
func EncodeEntities(types []string) *string {
	if types == nil {
		return nil
	}
	s := strings.Join(types, ",")
	return &s
}

// DecodeEntities reads EncodeEntities' column.
func DecodeEntities(col *string) []string {
	if col == nil {
		return nil
	}
	if *col == "" {
		return []string{}
	}
	return strings.Split(*col, ",")
}

// NameTaken is the error of a tenant name another tenant has:
// already_exists.
func NameTaken(name string) error {
	return errdefs.Sentence(errdefs.ErrAlreadyExists, "tenant name %q is taken; choose another", name)
}

// Store persists tenants and key hashes. The context stores implement it too.
// A tenant's Name, when not empty, is unique like its ID (CreateTenant and
// UpdateTenant answer NameTaken), so a name addresses one tenant.
type Store interface {
	CreateTenant(ctx context.Context, t *Tenant, keyHash string) error
	// TenantByKeyHash finds the tenant owning a key (errdefs.ErrNotFound).
	TenantByKeyHash(ctx context.Context, keyHash string) (*Tenant, error)
	GetTenant(ctx context.Context, id string) (*Tenant, error)
	ListTenants(ctx context.Context) ([]*Tenant, error)
	// SetKey replaces the tenant's key hash (rotation) and moves its
	// KeyGeneration on by one.
	SetKey(ctx context.Context, id, keyHash, keyPrefix string) error
	// UpdateTenant saves Name, GuardMode, Admin, GuardEntities and
	// IdleSuspendSeconds.
	UpdateTenant(ctx context.Context, t *Tenant) error
	DeleteTenant(ctx context.Context, id string) error
}

var keyPattern = regexp.MustCompile(`^e2b_[0-9a-f]{40}$`)

// NewKey returns a fresh API key.
func NewKey() (string, error) {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return "e2b_" + hex.EncodeToString(b), nil
}

// HashKey returns the stored form of a key.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// ValidKey reports whether key has the sandlot key shape.
func ValidKey(key string) bool { return keyPattern.MatchString(key) }

// Prefix is the displayable start of a key.
func Prefix(key string) string {
	if len(key) < 10 {
		return key
	}
	return key[:10]
}

// ErrBadKey is returned for a malformed or unknown key.
var ErrBadKey = fmt.Errorf("invalid API key: %w", errdefs.ErrUnauthenticated)
