package tenant

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sandlot/sandlot/errdefs"
)

// Key is one of a tenant's API keys as it is listed: never the key
// itself, which is shown once, when it is made, and stored as its hash.
type Key struct {
	ID       string `json:"id"`
	TenantID string `json:"-"`
	// Name is the tenant's label for the key ("" for the key the tenant
	// was created with or rotated to).
	Name string `json:"name"`
	// Prefix is the key's first characters (Prefix), to recognise it.
	Prefix    string    `json:"prefix"`
	CreatedAt time.Time `json:"createdAt"`
	// LastUsedAt is when a request last authenticated with the key, to
	// the minute (KeyUseInterval); nil when never since it was made.
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
}

// MaxKeys bounds a tenant's API keys: AddKey answers resource_exhausted
// past it.
const MaxKeys = 50

// MaxKeyName bounds a key's name, in bytes.
const MaxKeyName = 64

// KeyUseInterval is how often a key's LastUsedAt is written at most: the
// Authenticator records a use on a request with the key (from its cache
// too), and not again within this time, so a busy key costs one store
// write a minute, made in that request.
const KeyUseInterval = time.Minute

// Keys is what the key routes need of a store: a tenant's several API
// keys. The context stores implement it. Every method takes the tenant
// the key must belong to: another tenant's key id is ErrNotFound.
type Keys interface {
	// AddKey stores a new key of k.TenantID by its hash, filling k.ID and
	// k.CreatedAt; ErrNotFound for an unknown tenant, resource_exhausted
	// past MaxKeys.
	AddKey(ctx context.Context, k *Key, keyHash string) error
	// ListKeys lists tenantID's keys, oldest first.
	ListKeys(ctx context.Context, tenantID string) ([]*Key, error)
	// RevokeKey deletes tenantID's key id and returns its hash (so the
	// caller can drop it from a cache): ErrNotFound when tenantID has no
	// such key, failed_precondition when it is the tenant's last key.
	RevokeKey(ctx context.Context, tenantID, id string) (keyHash string, err error)
	// KeyUsed records that the key of keyHash authenticated at at.
	KeyUsed(ctx context.Context, keyHash string, at time.Time) error
}

// NewKeyID returns a key's id: "key_" and 16 hex digits, random (it says
// nothing of the key).
func NewKeyID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("tenant: key id: %v", err))
	}
	return "key_" + hex.EncodeToString(b)
}

// CheckKeyName refuses a name longer than MaxKeyName, not UTF-8, or with
// control characters (invalid_argument).
func CheckKeyName(name string) error {
	if len(name) > MaxKeyName || !utf8.ValidString(name) {
		return errdefs.Sentence(errdefs.ErrInvalidArgument, "a key's name is at most %d bytes of UTF-8", MaxKeyName)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return errdefs.Sentence(errdefs.ErrInvalidArgument, "a key's name may not hold control characters")
		}
	}
	return nil
}

// LastKey is RevokeKey's answer for a tenant's last key.
func LastKey(id string) error {
	return errdefs.Sentence(errdefs.ErrFailedPrecondition,
		"key %s is the tenant's last key; create another before revoking it", id)
}

// TooManyKeys is AddKey's answer past MaxKeys.
func TooManyKeys() error {
	return errdefs.Sentence(errdefs.ErrResourceExhausted, "a tenant has at most %d API keys; revoke one first", MaxKeys)
}
