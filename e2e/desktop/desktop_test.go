package desktop

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/nettest"
)

// TestDesktopSDK runs e2e/e2b/desktop.mjs: @e2b/desktop's Sandbox.create
// of the desktop template against serve --network, every kind of call the
// SDK makes, the stream with and without auth through
// https://6080-<id>.sandlot.localhost (TLS in front of serve's listener,
// as a deployment has it), and kill. Then nothing of the sandbox is left.
// The create takes a started desktop from the daemon's warm pool
// (--pool-sizes desktop=1, filled first): the SDK's own start of Xvfb and
// XFCE must find what it asked for and start nothing twice.
func TestDesktopSDK(t *testing.T) {
	node, dir := sdkSetup(t)

	srv, srvURL, key := serve(t, "--pool-sizes", "desktop=1")
	caFile := tlsFront(t, srvURL)
	waitPool(t, srvURL, key, 1, 5*time.Minute)

	out := runSDK(t, node, dir, "desktop.mjs", srvURL, key, "NODE_EXTRA_CA_CERTS="+caFile)
	var id string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "sandbox "); ok {
			id = v
		}
	}
	if id == "" {
		t.Fatal("no sandbox id in the output")
	}
	if m := sessionMetrics(t, srvURL, key); m.PoolHits < 1 {
		t.Errorf("the SDK's create did not take the warm desktop: %+v", m)
	}
	// Nothing left: no process in the sandbox's cgroup (its runtime id,
	// from serve's log), and the sandbox's port route is gone.
	m := regexp.MustCompile(`"context_id":"` + regexp.QuoteMeta(id) + `"[^\n]*"sandbox_id":"(sb-[0-9a-f]+)"`).FindStringSubmatch(srv.Log())
	if m == nil {
		t.Fatal("no sandbox id for the context in serve's log")
	}
	if left := processesIn(t, m[1]); len(left) > 0 {
		t.Errorf("left after kill in sandbox %s: %v", m[1], left)
	}
	req, _ := http.NewRequest("GET", srvURL+"/vnc.html", nil)
	req.Host = "6080-" + id + ".sandlot.localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// E2B's edge answers a gone sandbox's host-form port with 502 and this
	// body (network/ports).
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "The sandbox was not found") {
		t.Errorf("the stream route after kill: %d %s, want 502 The sandbox was not found", resp.StatusCode, body)
	}
}

// sessionMetrics reads serve's GET /v1/metrics/sessions.
func sessionMetrics(t *testing.T, srvURL, key string) api.SessionMetrics {
	t.Helper()
	req, _ := http.NewRequest("GET", srvURL+"/v1/metrics/sessions", nil)
	req.Header.Set("X-API-KEY", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m api.SessionMetrics
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitPool waits until serve's warm pool holds n sandboxes.
func waitPool(t *testing.T, srvURL, key string, n int64, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	for sessionMetrics(t, srvURL, key).PoolSize < n {
		if time.Since(start) > timeout {
			t.Fatalf("the warm pool did not reach %d in %s", n, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("warm pool filled in %s", time.Since(start).Round(time.Millisecond))
}

// processesIn lists the host's processes (pid and command name) whose
// cgroup path names the runtime sandbox id.
func processesIn(t *testing.T, sandboxID string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cg), "/"+sandboxID) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		out = append(out, e.Name()+" "+strings.TrimSpace(string(comm)))
	}
	return out
}

// serve starts `sandlot serve --network` with the tests' shared image
// store and returns its URL and the bootstrap tenant's key.
func serve(t *testing.T, extra ...string) (*testenv.Serve, string, string) {
	t.Helper()
	data := t.TempDir()
	state, err := os.MkdirTemp("", "sl-desk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	cmd := exec.Command(testenv.SandlotBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", data, "--state-dir", state,
		"--pool-size", "0", "--providers", "local", "--runtime", "crun", "--images-dir", debiantest.StoreDir(),
		"--network", "--network-spares", "0", "--network-upstream", "127.0.0.1:9", "--log-level", "debug")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(os.Environ(), "SANDLOT_ADDR=")
	srv := testenv.StartServe(t, cmd, data, 60*time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sandlot serve stderr:\n%s", srv.Log())
		}
		if !srv.Exited() {
			srv.Stop(t, 30*time.Second)
		}
	})
	b, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatalf("bootstrap key: %v", err)
	}
	return srv, srv.URL, strings.TrimSpace(string(b))
}

// tlsFront terminates TLS for *.sandlot.localhost on 127.0.0.1:443 (in
// the test's network namespace) and forwards to serve, Host kept, as a
// deployment's proxy would; it returns the CA file for NODE_EXTRA_CA_CERTS.
func tlsFront(t *testing.T, target string) string {
	t.Helper()
	cert, caPEM := nettest.ServerCert(t, "*.sandlot.localhost")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host
	}}
	l, err := tls.Listen("tcp4", "127.0.0.1:443", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return caFile
}
