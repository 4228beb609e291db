package desktop

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/nettest"
)

// TestDesktopRoute runs e2e/e2b/desktop-route.mjs against serve
// --network: a page served by one sandbox (the E2B SDK, public ports),
// opened in the browser of a desktop (@e2b/desktop, no egress) through
// http://<port>-<id>.sandlot.localhost, which the egress proxy answers
// with the ports route in process. Chromium would send that .localhost
// name to its own loopback; the host-resolver rule the runtime gives the
// desktop's root sends it to the gateway.
func TestDesktopRoute(t *testing.T) {
	nettest.Require(t)
	node := testenv.RequireBinary(t, "node")
	dir, err := filepath.Abs("../e2b")
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireFile(t, filepath.Join(dir, "node_modules/@e2b/desktop/package.json")) // npm ci in e2e/e2b (scripts/deps.sh)
	debiantest.Default(t)
	debiantest.Image(t, desktop.ImageConfig(), desktop.Template)

	_, srvURL, key := serve(t, "--pool-sizes", "desktop=0")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "desktop-route.mjs")
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2B_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "E2B_API_KEY="+key, "E2B_API_URL="+srvURL, "E2B_SANDBOX_URL="+srvURL)
	out, err := cmd.CombinedOutput()
	t.Logf("node desktop-route.mjs:\n%s", out)
	if err != nil || !strings.Contains(string(out), "\nok") {
		t.Fatalf("node desktop-route.mjs: %v", err)
	}
	// The page went through the ports route inside the daemon: the
	// tenant's audit trail has the desktop's connection to it.
	req, _ := http.NewRequest("GET", srvURL+"/v1/audit?kind=network.connection&limit=1000", nil)
	req.Header.Set("X-API-KEY", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"reason":"ports route"`) {
		t.Errorf("no connection through the ports route in the audit trail: %s", body)
	}
}
