package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// These tests run `sandlot serve` as a subprocess ($SANDLOT_BIN, else a
// fresh go build) over real HTTP, with the real store, manager and runtime.
// They need root, an OCI runtime and the agent binary ($SANDLOT_AGENT_BIN);
// without them they skip, unless CI=true, where that is a failure.

func runtimePreconditions(t testing.TB) {
	t.Helper()
	testenv.RequireOCIRuntime(t)
	// The daemon finds the agent through the environment.
	_, err := os.Stat(testenv.Env(t, "SANDLOT_AGENT_BIN"))
	testenv.Require(t, err == nil, fmt.Sprintf("SANDLOT_AGENT_BIN: %v", err))
}

// daemon is one `sandlot serve` process.
type daemon struct {
	*testenv.Serve
	key     string
	dataDir string
}

// startDaemon starts serve on a free loopback port over dataDir.
func startDaemon(t testing.TB, dataDir string, extra ...string) *daemon {
	t.Helper()
	// The default template comes from the tests' shared image store.
	debiantest.Default(t)
	return startServe(t, dataDir, append([]string{"--images-dir", debiantest.StoreDir()}, extra...)...)
}

// startServe is startDaemon with the image store extra names (or, without
// --images-dir, DATA_DIR/images, which the test fills itself).
func startServe(t testing.TB, dataDir string, extra ...string) *daemon {
	t.Helper()
	// --bootstrap-admin: the guard subtest switches the guard off with the
	// first start's key, which is an ordinary tenant's unless asked.
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir,
		"--state-dir", filepath.Join(dataDir, "run"), "--pool-size", "0", "--shutdown-timeout", "20s", "--bootstrap-admin"}, extra...)
	d := &daemon{Serve: testenv.StartServe(t, exec.Command(testenv.SandlotBinary(t), args...), dataDir, 60*time.Second), dataDir: dataDir}
	d.ContextsEnd = true // the tests end what they make (cleanup)
	b, err := os.ReadFile(filepath.Join(dataDir, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	d.key = strings.TrimSpace(string(b))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve logs (last 4 KB):\n%s", tail(d.Log(), 4096))
		}
	})
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop(t testing.TB) { d.Stop(t, 60*time.Second) }

// newTenant creates a tenant in the daemon's data dir (the CLI, as an
// operator would) and returns its API key.
func (d *daemon) newTenant(t testing.TB, name string, flags ...string) string {
	t.Helper()
	args := append([]string{"tenant", "create", "--data-dir", d.dataDir, "--json"}, flags...)
	out, err := exec.Command(testenv.SandlotBinary(t), append(args, name)...).Output()
	if err != nil {
		t.Fatalf("tenant create %s: %v", name, err)
	}
	var created struct{ APIKey string }
	if err := json.Unmarshal(out, &created); err != nil || created.APIKey == "" {
		t.Fatalf("tenant create %s: %q: %v", name, out, err)
	}
	return created.APIKey
}

func (d *daemon) client(key string) *client.Client {
	return client.New(d.URL, client.WithAPIKey(key))
}

// cleanup terminates every active context of key's tenant, so no sandbox
// outlives the test.
func (d *daemon) cleanup(t testing.TB, keys ...string) {
	t.Helper()
	for _, k := range keys {
		c := d.client(k)
		for {
			l, err := c.ListContexts(context.Background(), client.ListOptions{Status: []string{"active"}, Limit: 1000})
			if err != nil || len(l.Contexts) == 0 {
				break
			}
			for _, r := range l.Contexts {
				c.DeleteContext(context.Background(), r.ID)
			}
		}
	}
}

// raw does one HTTP call and returns the status and body.
func raw(t testing.TB, method, url, key, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// bearer is an http.RoundTripper that adds an API key.
type bearer string

func (k bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}
