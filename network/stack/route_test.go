package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/network/policy"
)

// TestPortsFromSandbox attacks the ports route from inside sandboxes,
// with the daemon's real E2B surface and its traffic tokens: a sandbox of
// tenant "closed" (mode none, no egress) reaches a private port of
// another "closed" sandbox only with that sandbox's token, never with its
// own or none, exactly as a client outside; a sandbox of tenant "open"
// without internet access reaches it not at all, token or not; python3
// finds the route by name (the resolver) and the stack gave the sandbox
// the route's gateway.
func TestPortsFromSandbox(t *testing.T) {
	e := newEnv(t, 0)
	d := newDaemon(t, e, "crun")
	create := func(key, network string) (id, token string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+d.addr+"/sandboxes", strings.NewReader(`{"templateID":"base","allow_internet_access":false,"network":`+network+`}`))
		req.Header.Set("X-API-KEY", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var created struct {
			SandboxID          string `json:"sandboxID"`
			TrafficAccessToken string `json:"trafficAccessToken"`
		}
		if resp.StatusCode != 201 || json.Unmarshal(b, &created) != nil || created.SandboxID == "" || created.TrafficAccessToken == "" {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
		return created.SandboxID, created.TrafficAccessToken
	}
	run := func(tenant, sid, code string) string {
		t.Helper()
		res, err := d.m.Execute(context.Background(), contexts.Identity{TenantID: tenant, ConversationID: sid, PathID: "main"},
			contexts.ExecuteRequest{ContextID: sid, Language: "bash", Code: code}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Stdout + res.Stderr
	}
	a, aToken := create(e2bKey, `{"allowPublicTraffic":false}`)
	b, bToken := create(e2bKeyOpen, `{"allowPublicTraffic":false}`)
	c, cToken := create(e2bKey, `{"allowPublicTraffic":false}`)
	run("closed", a, "mkdir -p /tmp/w && echo private-page-of-a > /tmp/w/p.html && (cd /tmp/w && nohup python3 -m http.server 8080 --bind 0.0.0.0 >/dev/null 2>&1 &) ; for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done")

	fetch := func(own string) string {
		return fmt.Sprintf(`python3 - <<'PY'
import sys, urllib.request, urllib.error
for token in ["", %q, %q]:
    req = urllib.request.Request("http://8080-%s.sandlot.localhost/p.html")
    if token:
        req.add_header("e2b-traffic-access-token", token)
    try:
        r = urllib.request.urlopen(req, timeout=20)
        print("status", r.status, r.read().decode().strip())
    except urllib.error.HTTPError as err:
        print("status", err.code, err.read().decode().strip())
    except Exception as err:
        print("error", err)
PY`, own, aToken, a)
	}
	check := func(who, out string, want []string) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(want) {
			t.Fatalf("from %s:\n%s", who, out)
		}
		for i, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("from %s, request %d (no token, its own token, the target's token): %q, want %q", who, i, lines[i], w)
			}
		}
	}
	// The same tenant's sandbox, mode none: as a client outside would.
	check("the same tenant's sandbox", run("closed", c, fetch(cToken)),
		[]string{"status 403 {\"code\":\"permission_denied\",\"message\":\"missing traffic access token", "status 403 {\"code\":\"permission_denied\",\"message\":\"invalid traffic access token", "status 200 private-page-of-a"})
	// Another tenant's sandbox without internet access: not even with the
	// target's token (no egress means no way out through another tenant's
	// port).
	deny := "status 403 {\"code\":\"permission_denied\",\"message\":\"another tenant's sandbox"
	check("another tenant's sandbox", run("open", b, fetch(bToken)), []string{deny, deny, deny})
	for _, sid := range []string{b, c} {
		if eff, ok := e.st.Policy(mustFind(t, e, sid)); !ok || eff.Mode() != policy.None {
			t.Errorf("the caller's sandbox %s is not in mode none: %+v", sid, eff)
		}
	}
}

// mustFind returns the runtime sandbox id of an E2B sandbox (its context).
func mustFind(t *testing.T, e *env, sid string) string {
	t.Helper()
	n, ok := e.st.Find(sid)
	if !ok {
		t.Fatalf("no network for %s", sid)
	}
	return n.SandboxID
}
