package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/telemetry/export"
	"github.com/sandlot/sandlot/tenant"
)

// TestUsageAndKeys: GET /v1/usage counts the key's tenant's active
// contexts against the manager's limits (its busiest conversation too)
// and never another tenant's; /v1/keys is wired to the store and to the
// daemon's one key cache, so a revoked key is refused by the next request.
func TestUsageAndKeys(t *testing.T) {
	dir := t.TempDir()
	d := start(t, "", Config{DataDir: filepath.Join(dir, "data"), Runtime: "no-such-runtime",
		StateDir: filepath.Join(dir, "run"), ShutdownTimeout: 5 * time.Second, Logger: export.NewLogger(&testenv.Buffer{}, "info")})
	ctx := context.Background()
	me, err := d.st.TenantByKeyHash(ctx, tenant.HashKey(d.key))
	if err != nil {
		t.Fatal(err)
	}
	add := func(tenantID, conv, path string) {
		t.Helper()
		now := time.Now()
		rec := &contexts.Record{ID: uuid.NewString(), Identity: contexts.Identity{TenantID: tenantID, ConversationID: conv, PathID: path},
			State: contexts.StateReady, CreatedAt: now, LastUsedAt: now, ExpiresAt: now.Add(time.Hour)}
		if err := d.st.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	add(me.ID, "c1", "main")
	add(me.ID, "c1", "b")
	add(me.ID, "c2", "main")
	for _, p := range []string{"1", "2", "3", "4"} {
		add("someone-else", "busy", p)
	}
	call := func(key, method, path string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, d.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if out != nil && res.StatusCode/100 == 2 {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %v %s", method, path, err, b)
			}
		}
		return res.StatusCode
	}
	var u api.Usage
	if code := call(d.key, "GET", "/v1/usage?tenant=someone-else", &u); code != http.StatusOK {
		t.Fatalf("usage: %d", code)
	}
	got := map[string][2]int64{}
	for _, q := range u.Quotas {
		if q.Description == "" {
			t.Errorf("quota %s has no description", q.Name)
		}
		got[q.Name] = [2]int64{q.Used, q.Limit}
	}
	want := map[string][2]int64{
		"contexts":                {3, contexts.DefaultMaxPerTenant},
		"contextsPerConversation": {2, contexts.DefaultMaxPerConversation},
		"requestsInFlight":        {1, DefaultMaxInFlightPerTenant},
	}
	for name := range got {
		if _, ok := want[name]; !ok && !strings.HasPrefix(name, "volume") && name != "snapshots" {
			t.Errorf("unexpected quota %s", name)
		}
		if _, ok := want[name]; !ok {
			delete(got, name) // volumes and snapshots are there where they are on
		}
	}
	if u.Tenant != me.ID || cmp.Diff(want, got) != "" {
		t.Fatalf("usage of %s (-want +got):\n%s", u.Tenant, cmp.Diff(want, got))
	}

	// Keys: made, used, revoked through the daemon.
	var made api.APIKeyCreated
	req, _ := http.NewRequest("POST", d.url+"/v1/keys", strings.NewReader(`{"name":"second"}`))
	req.Header.Set("Authorization", "Bearer "+d.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(res.Body).Decode(&made)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || !tenant.ValidKey(made.Key) {
		t.Fatalf("create key: %d %+v", res.StatusCode, made)
	}
	if code := call(made.Key, "GET", "/v1/tenant", nil); code != http.StatusOK {
		t.Fatalf("the new key: %d", code)
	}
	if code := call(d.key, "DELETE", "/v1/keys/"+made.ID, nil); code != http.StatusNoContent {
		t.Fatalf("revoke: %d", code)
	}
	if code := call(made.Key, "GET", "/v1/tenant", nil); code != http.StatusUnauthorized {
		t.Fatalf("the revoked key, cached a moment ago: %d", code)
	}
}
