package core

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// Token purposes. An envd token (envdAccessToken, X-Access-Token) opens
// every sandbox route; a traffic token (trafficAccessToken,
// E2B-Traffic-Access-Token) opens the code interpreter's port only, as on
// E2B, where it guards the sandbox's user-facing ports.
const (
	PurposeEnvd    = "envd"
	PurposeTraffic = "traffic"
)

// ResolveSandbox authenticates a sandbox call and loads its active record.
// Credentials, in order: X-API-KEY, X-Access-Token, and on the code
// interpreter's port E2B-Traffic-Access-Token. A call without any is 401:
// no route works with the sandbox id alone. A sandbox of the caller's
// found ended is forgotten (forgetEnded).
func (e *Edge) ResolveSandbox(r *http.Request, sid string) (*Ref, error) {
	var (
		t   *tenant.Tenant
		err error
	)
	switch {
	case r.Header.Get(e2bwire.HeaderAPIKey) != "":
		t, err = e.Authenticate(r.Context(), r.Header.Get(e2bwire.HeaderAPIKey))
	case r.Header.Get(e2bwire.HeaderAccessToken) != "":
		t, err = e.VerifyToken(r.Context(), r.Header.Get(e2bwire.HeaderAccessToken), PurposeEnvd, sid)
	case r.Header.Get(e2bwire.HeaderTrafficToken) != "" && r.Header.Get(e2bwire.HeaderSandboxPort) == e2bwire.InterpreterPort:
		t, err = e.VerifyToken(r.Context(), r.Header.Get(e2bwire.HeaderTrafficToken), PurposeTraffic, sid)
	default:
		err = fmt.Errorf("missing credentials (%s, %s or %s): %w", e2bwire.HeaderAccessToken, e2bwire.HeaderTrafficToken, e2bwire.HeaderAPIKey, errdefs.ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	ctx := tenant.With(r.Context(), t)
	// The manager's copy, when it serves the sandbox alone: a store read
	// per call was a fifth of the daemon's time on a command.
	rec, err := e.active(ctx, t.ID, sid, e.cfg.Manager.Served)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			e.forgetEnded(ctx, t.ID, sid)
		}
		return nil, err
	}
	return &Ref{TenantID: t.ID, Tenant: t, Rec: rec}, nil
}

// Authenticate resolves an API key to its tenant.
func (e *Edge) Authenticate(ctx context.Context, key string) (*tenant.Tenant, error) {
	if key == "" {
		return nil, fmt.Errorf("missing API key: %w", errdefs.ErrUnauthenticated)
	}
	t, err := e.cfg.Tenants.Key(ctx, key)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, fmt.Errorf("invalid API key: %w", errdefs.ErrUnauthenticated)
		}
		return nil, err
	}
	return t, nil
}

// Admit applies Config.Admit to an authenticated tenant.
func (e *Edge) Admit(ctx context.Context, tenantID string) (release func(), err error) {
	if e.cfg.Admit == nil {
		return func() {}, nil
	}
	return e.cfg.Admit(ctx, tenantID)
}

// tokenVersion prefixes the current token format. Tokens of the first
// format (sl1, never expiring) are refused.
const tokenVersion = "sl2"

// tokenClaims is what a token states; the signature covers every field
// and the sandbox id.
type tokenClaims struct {
	tenantID   string
	generation int64 // the tenant's KeyGeneration at issue
	created    int64 // the tenant's CreatedAt (unix ms): a re-created id is another tenant
	expires    int64 // unix seconds
}

// IssueToken signs a token of purpose for sandbox sid of tenantID.
func (e *Edge) IssueToken(ctx context.Context, purpose, tenantID, sid string) (string, error) {
	t, err := e.cfg.Tenants.Tenant(ctx, tenantID)
	if err != nil {
		return "", err
	}
	c := tokenClaims{tenantID: tenantID, generation: t.KeyGeneration, created: t.CreatedAt.UnixMilli(),
		expires: e.cfg.Clock().Add(e.cfg.TokenTTL).Unix()}
	fields := []string{tokenVersion, base64.RawURLEncoding.EncodeToString([]byte(tenantID)),
		strconv.FormatInt(c.generation, 10), strconv.FormatInt(c.created, 10), strconv.FormatInt(c.expires, 10)}
	return strings.Join(append(fields, e.tokenMAC(purpose, sid, fields)), "."), nil
}

func (e *Edge) tokenMAC(purpose, sid string, fields []string) string {
	m := hmac.New(sha256.New, e.cfg.Secret)
	m.Write([]byte("sandlot-e2b\x00" + purpose + "\x00" + sid))
	for _, f := range fields {
		m.Write([]byte("\x00" + f))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// VerifyToken checks a token's signature for purpose and sid, then its
// expiry, then that its tenant still exists with the same key generation.
// It returns the tenant.
func (e *Edge) VerifyToken(ctx context.Context, tok, purpose, sid string) (*tenant.Tenant, error) {
	bad := fmt.Errorf("invalid access token: %w", errdefs.ErrUnauthenticated)
	parts := strings.Split(tok, ".")
	if len(parts) != 6 || parts[0] != tokenVersion {
		return nil, bad
	}
	if !hmac.Equal([]byte(e.tokenMAC(purpose, sid, parts[:5])), []byte(parts[5])) {
		return nil, bad
	}
	id, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || len(id) == 0 {
		return nil, bad
	}
	var c tokenClaims
	c.tenantID = string(id)
	for i, p := range []*int64{&c.generation, &c.created, &c.expires} {
		if *p, err = strconv.ParseInt(parts[2+i], 10, 64); err != nil {
			return nil, bad
		}
	}
	if e.cfg.Clock().Unix() >= c.expires {
		return nil, fmt.Errorf("access token expired; connect to the sandbox again for a new one: %w", errdefs.ErrUnauthenticated)
	}
	t, err := e.cfg.Tenants.Tenant(ctx, c.tenantID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("access token of a deleted tenant: %w", errdefs.ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	if t.KeyGeneration != c.generation || t.CreatedAt.UnixMilli() != c.created {
		return nil, fmt.Errorf("access token revoked by a key rotation; connect to the sandbox again for a new one: %w", errdefs.ErrUnauthenticated)
	}
	return t, nil
}
