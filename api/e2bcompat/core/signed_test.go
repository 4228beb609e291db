package core_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sign is the SDKs' file URL signature (JS getSignature, Python
// get_signature): SHA-256 of path:operation:user:token[:expiration],
// base64 without padding, prefixed v1_.
func sign(path, op, user, token string, exp int64) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != 0 {
		raw += ":" + strconv.FormatInt(exp, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

// TestSignedFileURLs: a signed /files URL carries no header at all (no
// sandbox id, no credential); the server finds the sandbox whose token made
// the signature. Another path, operation, user, sandbox's token or a past
// expiration is 401.
func TestSignedFileURLs(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	other := e.Create(key2, `{}`)
	const path = "/home/user/s.txt"
	signed := func(op, user, token string, exp int64) string {
		q := url.Values{"path": {path}, "signature": {sign(path, op, user, token, exp)}}
		if user != "" {
			q.Set("username", user)
		}
		if exp != 0 {
			q.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		return "/files?" + q.Encode()
	}
	exp := time.Now().Add(time.Minute).Unix()
	resp := e.Do("POST", signed("write", "", sb.EnvdAccessToken, exp), bytes.NewReader([]byte("via signature")), "Content-Type", "application/octet-stream")
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		t.Fatalf("signed upload: %d %s", resp.StatusCode, b)
	}
	resp = e.Do("GET", signed("read", "user", sb.EnvdAccessToken, 0), nil)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "via signature" {
		t.Fatalf("signed download: %d %q", resp.StatusCode, b)
	}
	for name, u := range map[string]string{
		"write signature on a read": signed("write", "", sb.EnvdAccessToken, 0),
		"user":                      signed("read", "root", sb.EnvdAccessToken, 0),
		"bob":                       signed("read", "bob", sb.EnvdAccessToken, 0),
		"expired":                   signed("read", "", sb.EnvdAccessToken, time.Now().Add(-time.Minute).Unix()),
		"unknown token":             signed("read", "", "sl2.forged", 0),
		"bad signature":             "/files?path=" + url.QueryEscape(path) + "&signature=v1_AAAA",
	} {
		resp := e.Do("GET", u, nil)
		want := 401
		switch name {
		case "user":
			want = 200 // root signed as root: the agent decides whether the sandbox has root
		case "bob":
			want = 400 // no such user, refused before the signature is looked at
		}
		if resp.StatusCode != want {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("%s: status %d %s, want %d", name, resp.StatusCode, b, want)
		}
	}
	// another sandbox's token opens that sandbox only: the file is not there
	if resp := e.Do("GET", signed("read", "", other.EnvdAccessToken, 0), nil); resp.StatusCode != 404 {
		t.Errorf("other sandbox: %d, want 404", resp.StatusCode)
	}
}

// TestSignedURLAfterGetInfo: getInfo hands out fresh tokens, but the SDK
// keeps signing with create's: many getInfo calls must not push it out.
func TestSignedURLAfterGetInfo(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	for range 10 {
		e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)
	}
	const path = "/home/user"
	q := url.Values{"path": {path}, "signature": {sign(path, "read", "", sb.EnvdAccessToken, 0)}}
	// a directory: 400 says the signature was accepted and the read tried
	if resp := e.Do("GET", "/files?"+q.Encode(), nil); resp.StatusCode != 400 {
		t.Fatalf("signed with create's token after getInfo calls: %d", resp.StatusCode)
	}
}
