package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store/memory"
)

const (
	e2bKey     = "e2b_0123456789abcdef0123456789abcdef01234567"
	e2bKeyOpen = "e2b_76543210fedcba9876543210fedcba9876543210"
)

// daemon is the E2B surface and the ports route over a real manager whose
// sandboxes (crun) get their networks from the stack, on a loopback
// listener: what `sandlot serve --network` assembles.
type daemon struct {
	m       *contexts.Manager
	e2b     *e2bcompat.Handler
	addr    string
	handler http.Handler // what the listener at addr serves
}

func newDaemon(t *testing.T, e *env, kind string) *daemon {
	t.Helper()
	p := newProvider(t, kind, e.st)
	log := slog.New(slog.DiscardHandler)
	g := servedGuard(t, e)
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, MaxPerTenant: 20, Networks: e.st, Logger: log, Guard: g})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	d := &daemon{m: m}
	// "closed": a tenant without mode open; "open" may have it, and gets
	// E2B's default network (serve --e2b-internet).
	d.e2b = e2bcompat.New(e2bcompat.Config{Manager: m, Domain: "sandlot.localhost", Logger: log,
		Tenants: e2bcompattest.Tenants{e2bKey: "closed", e2bKeyOpen: "open"}, DefaultOpen: e.st.AllowsOpen})
	pr, err := e.st.Ports("sandlot.localhost", func(ctx context.Context, id, tenant, token string) error {
		t, err := d.e2b.VerifyTrafficToken(ctx, id, token)
		if err != nil || t != tenant {
			return errdefs.ErrPermissionDenied
		}
		return nil
	}, func(ctx context.Context, id, tenant string) (bool, error) { return d.e2b.Wake(ctx, tenant, id) }, nil, routeGuard{g, m})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pr.Match(r) {
			pr.ServeHTTP(w, r)
			return
		}
		d.e2b.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: d.handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	d.addr = l.Addr().String()
	return d
}

// TestE2BNetwork runs the official E2B JS SDK (e2e/e2b/network.mjs)
// against the daemon: create with a network, getInfo, a web server in
// the sandbox reached through getHost with and without the traffic
// token, updateNetwork opening a domain, allowInternetAccess met up to
// the caps (no egress, public ports), mode open named explicitly refused.
func TestE2BNetwork(t *testing.T) {
	e := newEnv(t, 1)
	d := newDaemon(t, e, "crun")
	url := "http://" + d.addr
	mustRunSDK(t, "network.mjs", 5*time.Minute, "E2B_API_KEY="+e2bKey, "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "DAEMON="+d.addr)
	if n := len(e.st.Manager().List()); n != 0 {
		t.Errorf("%d networks left after the sandboxes were killed", n)
	}
}

// TestE2BInternetDefault runs the official E2B JS SDK
// (e2e/e2b/internet.mjs) against a daemon with E2B's default network
// turned on: a create naming no network gets the open internet (the fake
// one) and public ports for a tenant that may have mode open, none for
// one that may not; a paused sandbox with autoResume is woken by a
// request to its port, one without answers 502.
func TestE2BInternetDefault(t *testing.T) {
	e := newEnv(t, 1)
	d := newDaemon(t, e, "crun")
	url := "http://" + d.addr
	mustRunSDK(t, "internet.mjs", 5*time.Minute, "E2B_API_KEY="+e2bKeyOpen, "CLOSED_KEY="+e2bKey, "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "DAEMON="+d.addr)
}

// TestPortPathRoute: a web server in a sandbox with public ports, reached
// by a plain HTTP client through the path route, on every runtime; a
// sandbox without a network has no ports (404), nor has a deleted one.
func TestPortPathRoute(t *testing.T) {
	e := newEnv(t, 0)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) { testPortPathRoute(t, newDaemon(t, e, kind)) })
	}
}

func testPortPathRoute(t *testing.T, d *daemon) {
	ctx := context.Background()
	id := contexts.Identity{TenantID: "closed", ConversationID: "c1", PathID: "main"}
	rec, err := d.m.GetOrCreate(ctx, id, contexts.CreateOptions{Network: &policy.Policy{Ingress: policy.Ingress{Public: true}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.m.Execute(ctx, id, contexts.ExecuteRequest{Language: "bash", Code: "mkdir -p /tmp/w && echo path-route-page > /tmp/w/p.html && (cd /tmp/w && nohup python3 -m http.server 8080 --bind 0.0.0.0 >/dev/null 2>&1 &) ; for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + d.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(fmt.Sprintf("/v1/contexts/%s/ports/8080/p.html", rec.ID)); code != 200 || !strings.Contains(body, "path-route-page") {
		t.Errorf("path route: %d %s", code, body)
	}
	other := contexts.Identity{TenantID: "closed", ConversationID: "c2", PathID: "main"}
	rec2, err := d.m.GetOrCreate(ctx, other, contexts.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(fmt.Sprintf("/v1/contexts/%s/ports/8080/", rec2.ID)); code != 404 {
		t.Errorf("a sandbox without a network: %d %s", code, body)
	}
	if err := d.m.Terminate(ctx, "closed", rec.ID, ""); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(fmt.Sprintf("/v1/contexts/%s/ports/8080/p.html", rec.ID)); code != 404 {
		t.Errorf("a terminated sandbox's port answers %d", code)
	}
}

// TestEnvdByHost: a sandbox's envd (49983) and code interpreter (49999)
// answer at <port>-<sandboxID>.<domain> on the daemon's listener, as the
// E2B SDKs address them when a create returns a domain and no sandbox URL
// is set (a plain HTTP client: the SDKs use https for that form); the
// other ports in the host form still reach the sandbox's own servers.
func TestEnvdByHost(t *testing.T) {
	e := newEnv(t, 0)
	d := newDaemon(t, e, "crun")
	do := func(method, host, path, body string, hdr map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+d.addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		c := &http.Client{Timeout: 2 * time.Minute}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := do("POST", d.addr, "/sandboxes", `{"templateID":"base","network":{"allowPublicTraffic":true}}`,
		map[string]string{"X-API-KEY": e2bKey, "Content-Type": "application/json"})
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var created struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
		Domain          string `json:"domain"`
	}
	if err := json.Unmarshal([]byte(body), &created); err != nil || created.SandboxID == "" || created.Domain != "sandlot.localhost" {
		t.Fatalf("create: %s %v", body, err)
	}
	sid := created.SandboxID
	envdHost := "49983-" + sid + ".sandlot.localhost"
	connect := map[string]string{"X-Access-Token": created.EnvdAccessToken, "Content-Type": "application/json", "Connect-Protocol-Version": "1"}

	if code, body := do("GET", envdHost, "/health", "", connect); code/100 != 2 {
		t.Errorf("envd /health by host: %d %s", code, body)
	}
	if code, body := do("POST", envdHost, "/filesystem.Filesystem/MakeDir", `{"path":"/home/user/by-host"}`, connect); code != 200 {
		t.Fatalf("envd MakeDir by host: %d %s", code, body)
	}
	if code, body := do("POST", envdHost, "/filesystem.Filesystem/Stat", `{"path":"/home/user/by-host"}`, connect); code != 200 || !strings.Contains(body, "by-host") {
		t.Errorf("envd Stat by host: %d %s", code, body)
	}
	if code, body := do("POST", envdHost, "/filesystem.Filesystem/Stat", `{"path":"/home/user"}`, map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}); code != 401 {
		t.Errorf("envd by host without a token: %d %s", code, body)
	}
	if code, body := do("POST", "49983-"+sid+"0.sandlot.localhost", "/filesystem.Filesystem/Stat", `{"path":"/home/user"}`, connect); code/100 != 4 && code != 502 {
		t.Errorf("envd of an unknown sandbox by host: %d %s", code, body)
	}
	code, body = do("POST", "49999-"+sid+".sandlot.localhost", "/execute", `{"code":"print(6*7)"}`, map[string]string{"X-Access-Token": created.EnvdAccessToken, "Content-Type": "application/json"})
	if code != 200 || !strings.Contains(body, "42") {
		t.Errorf("code interpreter /execute by host: %d %s", code, body)
	}
	// Port 8080 in the host form is still the sandbox's own server.
	_, err := d.m.Execute(context.Background(), contexts.Identity{TenantID: "closed", ConversationID: sid, PathID: "main"},
		contexts.ExecuteRequest{ContextID: sid, Language: "bash", Code: "mkdir -p /tmp/w && echo own-server > /tmp/w/p.html && (cd /tmp/w && nohup python3 -m http.server 8080 --bind 0.0.0.0 >/dev/null 2>&1 &) ; for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do("GET", "8080-"+sid+".sandlot.localhost", "/p.html", "", nil); code != 200 || !strings.Contains(body, "own-server") {
		t.Errorf("port 8080 by host: %d %s", code, body)
	}
}
