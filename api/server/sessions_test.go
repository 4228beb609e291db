package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
)

// TestSessionMetricsPerTenant: GET /v1/metrics/sessions over a real
// contexts manager counts the caller's tenant's sessions alone: tenant
// "user" never sees the counts of "quiet" (nor "quiet" the user's), and
// naming another tenant is 403 for them; an admin tenant's key reads every
// tenant's counts, or one tenant's with ?tenant=. Before, every key read
// the daemon-wide counts.
func TestSessionMetricsPerTenant(t *testing.T) {
	e := newGuardEnv(t)
	ctx := context.Background()
	id := func(tenantID, conv string) contexts.Identity {
		return contexts.Identity{TenantID: tenantID, ConversationID: conv, PathID: "main"}
	}
	for _, c := range []contexts.Identity{id("user", "c1"), id("user", "c1"), id("user", "c2"), id("quiet", "c1")} {
		if _, err := e.m.GetOrCreate(ctx, c, contexts.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	q, err := e.m.Lookup(ctx, id("quiet", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	e.m.HealthCheckFailed(q)
	if err := e.m.Terminate(ctx, "quiet", q.ID, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}

	get := func(key, query string) (int, api.SessionMetrics) {
		t.Helper()
		r := httptest.NewRequest("GET", "/v1/metrics/sessions"+query, nil)
		r.Header.Set("X-API-KEY", key)
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, r)
		var m api.SessionMetrics
		if w.Code == 200 {
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
		}
		return w.Code, m
	}
	user := api.SessionStats{ActiveSessions: 2, TotalCreated: 2, TotalReused: 1}
	quiet := api.SessionStats{TotalCreated: 1, TotalTerminated: 1, HealthCheckFailures: 1}
	all := api.SessionStats{ActiveSessions: 2, TotalCreated: 3, TotalReused: 1, TotalTerminated: 1, HealthCheckFailures: 1}
	for _, tc := range []struct {
		name, key, query string
		code             int
		tenant           string
		want             api.SessionStats
	}{
		{"user's own", e.keyUser, "", 200, "user", user},
		{"user names itself", e.keyUser, "?tenant=user", 200, "user", user},
		{"quiet's own", e.keyQuiet, "", 200, "quiet", quiet},
		{"user asks for quiet's", e.keyUser, "?tenant=quiet", http.StatusForbidden, "", api.SessionStats{}},
		{"quiet asks for every tenant's", e.keyQuiet, "?tenant=*", http.StatusForbidden, "", api.SessionStats{}},
		{"admin: every tenant's", e.keyAdmin, "", 200, "*", all},
		{"admin: quiet's", e.keyAdmin, "?tenant=quiet", 200, "quiet", quiet},
		{"admin: a tenant with none", e.keyAdmin, "?tenant=nobody", 200, "nobody", api.SessionStats{}},
		{"empty tenant", e.keyAdmin, "?tenant=", http.StatusBadRequest, "", api.SessionStats{}},
		{"control character", e.keyUser, "?tenant=a%01b", http.StatusBadRequest, "", api.SessionStats{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, m := get(tc.key, tc.query)
			if code != tc.code {
				t.Fatalf("status %d, want %d", code, tc.code)
			}
			if code != 200 {
				return
			}
			if m.Tenant != tc.tenant || m.Totals != tc.want || m.SessionStats != tc.want || m.Execution != tc.want || m.Desktop != (api.SessionStats{}) {
				t.Errorf("got %+v, want tenant %q and %+v in totals, top level and execution", m, tc.tenant, tc.want)
			}
		})
	}
}
