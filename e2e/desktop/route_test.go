package desktop

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestDesktopRoute runs e2e/e2b/desktop-route.mjs against serve
// --network: a page served by one sandbox (the E2B SDK, public ports),
// opened in the browser of a desktop (@e2b/desktop, no egress) through
// http://<port>-<id>.sandlot.localhost, which the egress proxy answers
// with the ports route in process. Chromium would send that .localhost
// name to its own loopback; the host-resolver rule the runtime gives the
// desktop's root sends it to the gateway.
func TestDesktopRoute(t *testing.T) {
	node, dir := sdkSetup(t)
	_, srvURL, key := serve(t, "--pool-sizes", "desktop=0")
	runSDK(t, node, dir, "desktop-route.mjs", srvURL, key)
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
