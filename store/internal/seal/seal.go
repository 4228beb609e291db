// Package seal encrypts tenants' secret values at rest (AES-256-GCM, the
// standard library's), for the SQLite and Postgres stores. A sealed value
// is "sealed:v1:" + base64(nonce || ciphertext); the tenant and the secret's
// name are the additional data, so a value copied to another row (another
// tenant, another name) does not open. Values without the prefix are rows
// written before encryption, read as they are until Migrate seals them.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// Prefix starts every sealed value.
const Prefix = "sealed:v1:"

// ErrWrongKey is the failure to open a sealed value: another key sealed it
// (or the row was altered). It is a fault of the daemon's configuration,
// not of the caller, so it carries no errdefs category (a 5xx).
var ErrWrongKey = errors.New("a stored secret does not open with this daemon's secrets key (was the key changed or lost? every daemon sharing a store needs the same key)")

// Box seals and opens values under one key. The zero of *Box (nil) has no
// key: Seal fails and sealed values do not open.
type Box struct {
	aead cipher.AEAD
}

// New returns a box for key (KeySize bytes).
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secrets key of %d bytes, want %d: %w", len(key), KeySize, errdefs.ErrInvalidArgument)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

var errNoKey = fmt.Errorf("the store has no secrets key to encrypt secrets with: %w", errdefs.ErrFailedPrecondition)

// Seal encrypts value for the secret name of tenant.
func (b *Box) Seal(tenant, name, value string) (string, error) {
	if b == nil {
		return "", errNoKey
	}
	return b.seal([]byte(value), ad(tenant, name))
}

func (b *Box) seal(plain, ad []byte) (string, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := b.aead.Seal(nonce, nonce, plain, ad)
	return Prefix + base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts a stored value of the secret name of tenant; a value
// without Prefix (written before encryption) is returned as it is.
func (b *Box) Open(tenant, name, stored string) (string, error) {
	if !Sealed(stored) {
		return stored, nil
	}
	plain, err := b.open(stored, ad(tenant, name), fmt.Sprintf("secret %q of tenant %s", name, tenant))
	return string(plain), err
}

// open decrypts sealed value stored of what under ad.
func (b *Box) open(stored string, ad []byte, what string) ([]byte, error) {
	enc, ok := strings.CutPrefix(stored, Prefix)
	if !ok {
		return nil, fmt.Errorf("%s: not a sealed value: %w", what, ErrWrongKey)
	}
	if b == nil {
		return nil, fmt.Errorf("%s is encrypted and the store has no secrets key: %w", what, ErrWrongKey)
	}
	raw, err := base64.RawStdEncoding.DecodeString(enc)
	n := b.aead.NonceSize()
	if err != nil || len(raw) < n+b.aead.Overhead() {
		return nil, fmt.Errorf("%s: malformed sealed value: %w", what, ErrWrongKey)
	}
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], ad)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, ErrWrongKey)
	}
	return plain, nil
}

// Sealed reports whether a stored value is sealed.
func Sealed(stored string) bool { return strings.HasPrefix(stored, Prefix) }

func ad(tenant, name string) []byte { return []byte("sandlot secret\x00" + tenant + "\x00" + name) }

// Row is one stored secret as a store reads it for sealing at open.
type Row struct{ Tenant, Name, Value string }

// Unsealed checks that b opens the first sealed row of rows (a wrong key
// is an error, so a daemon stops at start rather than at a sandbox's first
// request) and returns the rows stored before the store had a key, each
// with its value sealed: the updates a store makes, matching the
// plaintext so a concurrent sealer's rows are left alone.
func (b *Box) Unsealed(rows []Row) (plain []Row, sealed []string, err error) {
	checked := false
	for _, r := range rows {
		if !Sealed(r.Value) {
			s, err := b.Seal(r.Tenant, r.Name, r.Value)
			if err != nil {
				return nil, nil, err
			}
			plain, sealed = append(plain, r), append(sealed, s)
		} else if !checked {
			if _, err := b.Open(r.Tenant, r.Name, r.Value); err != nil {
				return nil, nil, err
			}
			checked = true
		}
	}
	return plain, sealed, nil
}

// SealEnv encrypts the environment a create gave tenant's context
// contextID (contexts.Record.Env, a wake gives it to the new sandbox): its
// JSON, under additional data of its own, so a sealed environment neither
// opens as a secret nor on another context's row. An empty env is "".
func (b *Box) SealEnv(tenant, contextID string, env map[string]string) (string, error) {
	if len(env) == 0 {
		return "", nil
	}
	if b == nil {
		return "", errNoKey
	}
	plain, err := json.Marshal(env)
	if err != nil {
		return "", err
	}
	return b.seal(plain, envAD(tenant, contextID))
}

// OpenEnv decrypts what SealEnv stored for tenant's context contextID; ""
// is no environment.
func (b *Box) OpenEnv(tenant, contextID, stored string) (map[string]string, error) {
	if stored == "" {
		return nil, nil
	}
	what := fmt.Sprintf("the environment of context %s of tenant %s", contextID, tenant)
	plain, err := b.open(stored, envAD(tenant, contextID), what)
	if err != nil {
		return nil, err
	}
	var env map[string]string
	if err := json.Unmarshal(plain, &env); err != nil {
		return nil, fmt.Errorf("%s: %w", what, ErrWrongKey)
	}
	return env, nil
}

func envAD(tenant, contextID string) []byte {
	return []byte("sandlot context env\x00" + tenant + "\x00" + contextID)
}
