package core

import (
	"crypto/sha256"
	"crypto/subtle"
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

// Signed file URLs (Sandbox.uploadUrl, downloadUrl). The SDK signs
// "path:operation:user:envdAccessToken[:expiration]" with SHA-256 (base64,
// padding dropped, prefixed "v1_") and puts the signature and expiration
// in the query of GET or POST /files. On E2B the host name names the
// sandbox; behind E2B_SANDBOX_URL the URL names none, so the handler keeps
// the envd tokens it issued (a few per sandbox, in memory) and finds the
// one that produced the signature. A URL signed with a token issued before
// the daemon restarted is refused: getInfo or connect issue a new one.

// signerTokensPerSandbox bounds the tokens kept per sandbox (create and
// connect issue one each, and the SDK signs with the one it got last);
// the newest are kept.
const signerTokensPerSandbox = 4

// maxSigners bounds the sandboxes whose tokens are kept; past it the
// table is cleared and fills again as tokens are issued. With
// signerTokensPerSandbox it bounds the hashes one signed request costs
// (40 000, some milliseconds of CPU).
const maxSigners = 10_000

// signedSearches bounds the signature searches running at once: a signed
// request carries no credential the server can look up, so a flood of
// them is refused (429) rather than allowed to take every core.
var signedSearches = make(chan struct{}, 2)

// RememberToken records an issued envd token of sandbox sid, for its
// signed file URLs.
func (e *Edge) RememberToken(sid, tok string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended[sid] {
		return
	}
	if len(e.signers) >= maxSigners {
		if _, ok := e.signers[sid]; !ok {
			clear(e.signers)
		}
	}
	toks := append(e.signers[sid], tok)
	if len(toks) > signerTokensPerSandbox {
		toks = toks[len(toks)-signerTokensPerSandbox:]
	}
	e.signers[sid] = toks
}

// SignedRequest reports whether r is a signed /files call: a signature in
// the query and no other credential.
func SignedRequest(r *http.Request) bool {
	return r.URL.Path == "/files" && r.URL.Query().Has("signature") &&
		r.Header.Get(e2bwire.HeaderAPIKey) == "" && r.Header.Get(e2bwire.HeaderAccessToken) == ""
}

// fileSignature computes the SDK's signature of a file operation.
func fileSignature(path, op, user, token, expiration string) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if expiration != "" {
		raw += ":" + expiration
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

// errExpiredSignature is envd's answer to a signature past its expiration,
// word for word (E2B's signing tests compare the body).
var errExpiredSignature error = exactError{"signature is already expired", errdefs.ErrUnauthenticated}

// exactError is an error of a category whose text is the message alone.
type exactError struct {
	msg      string
	category error
}

func (e exactError) Error() string { return e.msg }
func (e exactError) Unwrap() error { return e.category }

// ResolveSigned authenticates a signed /files call: the signature must be
// one of a kept token's (of sandbox sid when the header names one), not
// expired, for the method's operation, and the token itself still valid.
func (e *Edge) ResolveSigned(r *http.Request, sid string) (*Ref, error) {
	q := r.URL.Query()
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	} else if r.Method != http.MethodGet {
		return nil, fmt.Errorf("signed URLs are for GET and POST /files: %w", errdefs.ErrInvalidArgument)
	}
	exp := q.Get("signature_expiration")
	if exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("signature_expiration must be unix seconds: %w", errdefs.ErrInvalidArgument)
		}
		if e.cfg.Clock().Unix() > n {
			return nil, errExpiredSignature
		}
	}
	want := q.Get("signature")
	if !strings.HasPrefix(want, "v1_") {
		return nil, fmt.Errorf("invalid signature: %w", errdefs.ErrUnauthenticated)
	}
	select {
	case signedSearches <- struct{}{}:
		defer func() { <-signedSearches }()
	default:
		return nil, fmt.Errorf("too many signed file requests at once; retry: %w", errdefs.ErrResourceExhausted)
	}
	type cand struct{ sid, tok string }
	var cands []cand
	e.mu.Lock()
	for id, toks := range e.signers {
		if sid != "" && id != sid {
			continue
		}
		for _, t := range toks {
			cands = append(cands, cand{id, t})
		}
	}
	e.mu.Unlock()
	for _, c := range cands {
		got := fileSignature(q.Get("path"), op, q.Get("username"), c.tok, exp)
		if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			continue
		}
		t, err := e.VerifyToken(r.Context(), c.tok, PurposeEnvd, c.sid)
		if err != nil {
			return nil, err
		}
		rec, err := e.Active(tenant.With(r.Context(), t), t.ID, c.sid)
		if err != nil {
			if errors.Is(err, errdefs.ErrNotFound) {
				e.Forget(c.sid)
			}
			return nil, err
		}
		return &Ref{TenantID: t.ID, Tenant: t, Rec: rec}, nil
	}
	return nil, fmt.Errorf("invalid signature (a URL signed before the server restarted needs a new one): %w", errdefs.ErrUnauthenticated)
}
