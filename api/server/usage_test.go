package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
)

// TestUsage: GET /v1/usage asks the daemon for the key's tenant only, a
// ?tenant= naming another changes nothing; without a source it is 412.
func TestUsage(t *testing.T) {
	var asked []string
	e := newEnv(t, func(c *server.Config) {
		c.Usage = func(_ context.Context, tenantID string) ([]api.Quota, error) {
			asked = append(asked, tenantID)
			return []api.Quota{{Name: "contexts", Used: 1, Limit: 10, Description: "d"}}, nil
		}
	})
	w := e.do(t, req{method: "GET", path: "/v1/usage?tenant=tenant-b", key: e.KeyA})
	var u api.Usage
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &u) != nil || u.Tenant != "tenant-a" || len(u.Quotas) != 1 {
		t.Fatalf("usage: %d %s", w.Code, w.Body)
	}
	if len(asked) != 1 || asked[0] != "tenant-a" {
		t.Fatalf("asked for %v, want tenant-a only", asked)
	}
	if w := e.do(t, req{method: "GET", path: "/v1/usage"}); w.Code != http.StatusUnauthorized {
		t.Fatalf("no key: %d", w.Code)
	}
	if e := newEnv(t, nil); e.do(t, req{method: "GET", path: "/v1/usage", key: e.KeyA}).Code != http.StatusPreconditionFailed {
		t.Fatal("without Usage: not 412")
	}
}
