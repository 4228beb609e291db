package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/telemetry/export"
	"github.com/sandlot/sandlot/tenant"
)

// On the real daemon (real runtime, SQLite store shared with the tenant
// commands): E2B access tokens die with a key rotation, and deleting the
// tenant revokes everything and ends its contexts with reason deleted.
// Before, tokens were valid forever and contexts outlived their tenant
// until they expired.
func TestTenantLifecycleRevokes(t *testing.T) {
	lrunNeedAgent(t)
	ctx := context.Background()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	storeURL := "sqlite://" + filepath.Join(data, "sandlot.db")
	d, err := startDaemon(ctx, storeURL, daemon.Config{DataDir: data, StateDir: filepath.Join(dir, "run"),
		Limits: contexts.Limits{MemoryBytes: 256 << 20}, ShutdownTimeout: 5 * time.Second, Logger: export.NewLogger(io.Discard, "error")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	tn, err := d.st.TenantByKeyHash(ctx, tenant.HashKey(d.key))
	if err != nil {
		t.Fatal(err)
	}

	type sandbox struct{ SandboxID, EnvdAccessToken, TrafficAccessToken string }
	call := func(method, path, body string, hdr ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, d.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	// execute runs code with the envd token; contexts lists code contexts
	// with the traffic token, as the code interpreter SDK does.
	execute := func(sb sandbox) int {
		st, _ := call("POST", "/execute", `{"code":"print(6*7)"}`, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999", "X-Access-Token", sb.EnvdAccessToken)
		return st
	}
	contextsList := func(sb sandbox) int {
		st, _ := call("GET", "/contexts", "", "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999", "E2B-Traffic-Access-Token", sb.TrafficAccessToken)
		return st
	}
	// eventually polls until f returns want (revocation goes through
	// one-second caches).
	eventually := func(what string, want int, f func() int) {
		t.Helper()
		var got int
		for range 100 {
			if got = f(); got == want {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: %d, want %d", what, got, want)
	}

	st, b := call("POST", "/v2/sandboxes", `{"templateID":"base"}`, "X-API-KEY", d.key)
	var sb sandbox
	if st != 201 || json.Unmarshal(b, &sb) != nil {
		t.Fatalf("create: %d %s", st, b)
	}
	if st := execute(sb); st != 200 {
		t.Fatalf("execute with a fresh token: %d", st)
	}
	if st := contextsList(sb); st != 200 {
		t.Fatalf("contexts with a fresh traffic token: %d", st)
	}

	// Key rotation: the old key and the tokens issued under it stop.
	out, _, err := run(t, "", "tenant", "rotate-key", "--store", storeURL, "--json", tn.ID)
	var rotated struct{ APIKey string }
	if err != nil || json.Unmarshal([]byte(out), &rotated) != nil {
		t.Fatalf("rotate-key: %q %v", out, err)
	}
	eventually("envd token after rotation", 401, func() int { return execute(sb) })
	eventually("traffic token after rotation", 401, func() int { return contextsList(sb) })
	st, b = call("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", `{}`, "X-API-KEY", rotated.APIKey)
	var again sandbox
	if st != 200 || json.Unmarshal(b, &again) != nil {
		t.Fatalf("connect with the new key: %d %s", st, b)
	}
	if st := execute(again); st != 200 {
		t.Fatalf("execute with a token of the new key: %d", st)
	}

	// Deletion: key, tokens and the context go.
	if _, _, err := run(t, "", "tenant", "delete", "--store", storeURL, tn.ID); err != nil {
		t.Fatal(err)
	}
	eventually("token after the tenant's deletion", 401, func() int { return execute(again) })
	eventually("traffic token after the tenant's deletion", 401, func() int { return contextsList(again) })
	if st, _ := call("GET", "/v2/sandboxes", "", "X-API-KEY", rotated.APIKey); st != 401 {
		t.Fatalf("key of the deleted tenant: %d", st)
	}
	var rec *contexts.Record
	eventually("context of the deleted tenant", 1, func() int {
		rec, err = d.st.Get(ctx, sb.SandboxID)
		if err == nil && rec.State == contexts.StateTerminated && rec.Reason == contexts.ReasonDeleted {
			return 1
		}
		return 0
	})
}
