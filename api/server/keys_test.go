package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
)

// keysEnv serves /v1 over a memory store with tenants a and b, through a
// real Authenticator whose cache outlives the test: a revoked key that
// still worked would be the cache's doing.
func keysEnv(t *testing.T) (e *env, keyA, keyB string) {
	t.Helper()
	st := memory.New()
	keyA, keyB = "e2b_"+strings.Repeat("a", 40), "e2b_"+strings.Repeat("b", 40)
	for id, key := range map[string]string{"a": keyA, "b": keyB} {
		if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: id, KeyPrefix: tenant.Prefix(key)}, tenant.HashKey(key)); err != nil {
			t.Fatal(err)
		}
	}
	e = newEnv(t, func(c *server.Config) {
		c.Auth = tenant.NewAuthenticator(st, tenant.AuthConfig{CacheTTL: time.Hour})
		c.Keys = st
		c.AuditAdd = func(ev audit.Event) { _ = st.AppendAudit(context.Background(), ev) }
		c.Audit = st.ListAuditKind
	})
	return e, keyA, keyB
}

func listKeys(t *testing.T, e *env, key string) api.APIKeyList {
	t.Helper()
	w := e.do(t, req{method: "GET", path: "/v1/keys", key: key})
	if w.Code != http.StatusOK {
		t.Fatalf("list: %d %s", w.Code, w.Body)
	}
	var l api.APIKeyList
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestKeys: a tenant makes a key (shown once), lists its keys without
// their secret, and revokes one; the revoked key is refused by the next
// request, though the Authenticator's cache had it; the last key stays.
func TestKeys(t *testing.T) {
	e, keyA, _ := keysEnv(t)
	w := e.do(t, req{method: "POST", path: "/v1/keys", key: keyA, body: api.APIKeyRequest{Name: "ci runner"}})
	if w.Code != http.StatusCreated || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %v %s", w.Code, w.Header(), w.Body)
	}
	var made api.APIKeyCreated
	if err := json.Unmarshal(w.Body.Bytes(), &made); err != nil {
		t.Fatal(err)
	}
	if !tenant.ValidKey(made.Key) || made.Name != "ci runner" || made.Prefix != tenant.Prefix(made.Key) {
		t.Fatalf("created: %+v", made)
	}
	// The new key works, and is never shown again.
	l := listKeys(t, e, made.Key)
	if len(l.Keys) != 2 {
		t.Fatalf("keys: %+v", l)
	}
	for _, k := range []string{made.Key, keyA} {
		if w := e.do(t, req{method: "GET", path: "/v1/keys", key: made.Key}); strings.Contains(w.Body.String(), k) {
			t.Fatalf("the list shows a key: %s", w.Body)
		}
	}
	var first string
	for _, k := range l.Keys {
		if k.Current != (k.ID == made.ID) {
			t.Errorf("current: %+v", k)
		}
		if k.ID != made.ID {
			first = k.ID
		}
	}
	// The use is written in the background: wait for it, bounded.
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l := listKeys(t, e, keyA)
		if l.Keys[0].LastUsedAt != nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the key in use has no last use: %+v", l.Keys[0])
		}
	}

	// keyA is cached by the Authenticator; revoking it (with the new key)
	// must end it at once.
	if w := e.do(t, req{method: "DELETE", path: "/v1/keys/" + first, key: made.Key}); w.Code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, req{method: "GET", path: "/v1/tenant", key: keyA}); w.Code != http.StatusUnauthorized {
		t.Fatalf("a revoked key: %d %s", w.Code, w.Body)
	}
	// The last key cannot revoke itself.
	if w := e.do(t, req{method: "DELETE", path: "/v1/keys/" + made.ID, key: made.Key}); w.Code != http.StatusPreconditionFailed {
		t.Fatalf("revoke the last key: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, req{method: "GET", path: "/v1/tenant", key: made.Key}); w.Code != http.StatusOK {
		t.Fatalf("the last key after a refused revocation: %d %s", w.Code, w.Body)
	}
	// Both are in a's trail, by id.
	w = e.do(t, req{method: "GET", path: "/v1/audit", key: made.Key})
	if !strings.Contains(w.Body.String(), `"kind":"tenant.key_created"`) || !strings.Contains(w.Body.String(), `"kind":"tenant.key_revoked"`) ||
		!strings.Contains(w.Body.String(), first) || strings.Contains(w.Body.String(), made.Key) {
		t.Errorf("the trail: %s", w.Body)
	}
	for _, bad := range []string{`{"name": "a\u0000b"}`, `{"name": "` + strings.Repeat("n", 65) + `"}`, `{"name": 5}`, `{"key": "e2b_mine"}`, `[]`} {
		if w := e.do(t, req{method: "POST", path: "/v1/keys", key: made.Key, body: bad}); w.Code != http.StatusBadRequest {
			t.Errorf("create %s: %d %s", bad, w.Code, w.Body)
		}
	}
}

// TestKeysWalls: a tenant never sees nor revokes another tenant's key.
func TestKeysWalls(t *testing.T) {
	e, keyA, keyB := keysEnv(t)
	a := listKeys(t, e, keyA).Keys[0]
	b := listKeys(t, e, keyB)
	if len(b.Keys) != 1 || b.Keys[0].ID == a.ID {
		t.Fatalf("b's keys: %+v", b)
	}
	// Give a a second key, so that revoking a's first is not refused as
	// its last.
	if w := e.do(t, req{method: "POST", path: "/v1/keys", key: keyA}); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	for _, id := range []string{a.ID, "key_0000000000000000", "%00", "x%2F..%2Fkeys"} {
		if w := e.do(t, req{method: "DELETE", path: "/v1/keys/" + id, key: keyB}); w.Code != http.StatusNotFound {
			t.Errorf("b revoking %q: %d %s", id, w.Code, w.Body)
		}
	}
	if w := e.do(t, req{method: "GET", path: "/v1/tenant", key: keyA}); w.Code != http.StatusOK {
		t.Fatalf("a's key after b's attempts: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, req{method: "GET", path: "/v1/keys", key: keyB}); strings.Contains(w.Body.String(), a.ID) {
		t.Fatalf("b's list names a's key: %s", w.Body)
	}
	if w := e.do(t, req{method: "GET", path: "/v1/keys"}); w.Code != http.StatusUnauthorized {
		t.Fatalf("no key: %d", w.Code)
	}
}
