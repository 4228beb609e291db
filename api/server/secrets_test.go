package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
)

// TestSecrets: a tenant puts, lists and deletes its secrets; the value
// never comes back; another tenant sees none of them; bad input is a 400;
// every change is reported by tenant; without a store the routes are 412.
func TestSecrets(t *testing.T) {
	st := memory.New()
	var mu sync.Mutex
	var changed []string
	e := newEnv(t, func(c *server.Config) {
		c.Secrets = st
		c.SecretsChanged = func(id string) { mu.Lock(); changed = append(changed, id); mu.Unlock() }
	})
	for _, id := range []string{"tenant-a", "tenant-b"} {
		if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("e2b_"+id)); err != nil {
			t.Fatal(err)
		}
	}
	const value = "ghp_the-real-value-123"
	w := e.do(t, req{method: "PUT", path: "/v1/secrets/gh-token", key: e.KeyA, body: api.SecretRequest{Value: value, Hosts: []string{"api.github.com"}, Env: "GH_TOKEN"}})
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), value) {
		t.Fatalf("put: %d %s", w.Code, w.Body)
	}
	var put api.Secret
	json.Unmarshal(w.Body.Bytes(), &put)
	if !strings.HasPrefix(put.Placeholder, "sandlot-secret-") || put.Env != "GH_TOKEN" {
		t.Errorf("put: %+v", put)
	}
	w = e.do(t, req{method: "GET", path: "/v1/secrets", key: e.KeyA})
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), value) || !strings.Contains(w.Body.String(), put.Placeholder) {
		t.Errorf("list: %d %s", w.Code, w.Body)
	}
	if w = e.do(t, req{method: "GET", path: "/v1/secrets", key: e.KeyB}); w.Code != http.StatusOK || strings.Contains(w.Body.String(), "gh-token") {
		t.Errorf("another tenant's list: %d %s", w.Code, w.Body)
	}
	if w = e.do(t, req{method: "DELETE", path: "/v1/secrets/gh-token", key: e.KeyB}); w.Code != http.StatusNotFound {
		t.Errorf("another tenant's delete: %d %s", w.Code, w.Body)
	}
	for _, bad := range []any{
		`{"value": "v", "hosts": ["a.test"]}`, `{"value": "value1", "hosts": []}`, `{"value": "value1", "hosts": ["*"]}`,
		`{"value": "value1", "hosts": ["a.test"], "env": "1X"}`, `{"value": 5}`, `not json`,
	} {
		if w = e.do(t, req{method: "PUT", path: "/v1/secrets/x", key: e.KeyA, body: bad}); w.Code != http.StatusBadRequest {
			t.Errorf("put %v: %d %s", bad, w.Code, w.Body)
		}
	}
	if w = e.do(t, req{method: "PUT", path: "/v1/secrets/bad%20name", key: e.KeyA, body: api.SecretRequest{Value: value, Hosts: []string{"a.test"}}}); w.Code != http.StatusBadRequest {
		t.Errorf("bad name: %d %s", w.Code, w.Body)
	}
	if w = e.do(t, req{method: "DELETE", path: "/v1/secrets/gh-token", key: e.KeyA}); w.Code != http.StatusNoContent {
		t.Errorf("delete: %d %s", w.Code, w.Body)
	}
	if w = e.do(t, req{method: "DELETE", path: "/v1/secrets/gh-token", key: e.KeyA}); w.Code != http.StatusNotFound {
		t.Errorf("delete again: %d %s", w.Code, w.Body)
	}
	mu.Lock()
	if strings.Join(changed, ",") != "tenant-a,tenant-a" {
		t.Errorf("changes reported: %v", changed)
	}
	mu.Unlock()

	off := newEnv(t, nil)
	if w = off.do(t, req{method: "GET", path: "/v1/secrets", key: off.KeyA}); w.Code != http.StatusPreconditionFailed {
		t.Errorf("without a store: %d %s", w.Code, w.Body)
	}
}
