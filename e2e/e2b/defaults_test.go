package e2b

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/internal/testenv"
)

// pythonCreate is the body the E2B Python SDK 2.33 sends on
// Sandbox.create() (POST /sandboxes), byte for byte: allow_internet_access
// is true unless the program passes False.
const pythonCreate = `{"templateID":"base","allow_internet_access":true,"autoPause":false,"autoResume":{"enabled":false},"envVars":{},"metadata":{},"secure":true,"timeout":300}`

// TestE2BDefaultDaemon: a `sandlot serve` with no flags serves every E2B
// SDK's default create. The Python SDK's create body, replayed, and the
// JS SDKs 2.51 and 2.45 (defaults.mjs; 2.45 sends allow_internet_access
// true on every create, as the Python SDK does) get a sandbox without a
// network, the operator's default, and getInfo says allowInternetAccess
// false; a network named beyond the cap is a 403. Before, every create
// of the Python SDK and the JS SDK before 2.51 was a 403 ("open internet
// access is not allowed for this tenant").
func TestE2BDefaultDaemon(t *testing.T) {
	npmReady(t)
	testenv.RequireRoot(t) // serve runs the local provider
	url, key := serve(t, testenv.SandlotBinary(t))

	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-KEY", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	t.Run("python create body", func(t *testing.T) {
		code, b := do("POST", "/sandboxes", pythonCreate)
		if code != 201 {
			t.Fatalf("create: %d %s", code, b)
		}
		var sb struct{ SandboxID string }
		if err := json.Unmarshal(b, &sb); err != nil || sb.SandboxID == "" {
			t.Fatalf("create: %s %v", b, err)
		}
		code, b = do("GET", "/sandboxes/"+sb.SandboxID, "")
		var info struct {
			AllowInternetAccess *bool           `json:"allowInternetAccess"`
			Network             json.RawMessage `json:"network"`
		}
		if err := json.Unmarshal(b, &info); code != 200 || err != nil {
			t.Fatalf("getInfo: %d %s %v", code, b, err)
		}
		if info.AllowInternetAccess == nil || *info.AllowInternetAccess || info.Network != nil {
			t.Errorf("getInfo says %s, want allowInternetAccess false and no network", b)
		}
		if code, b := do("DELETE", "/sandboxes/"+sb.SandboxID, ""); code != 204 {
			t.Errorf("kill: %d %s", code, b)
		}
	})
	t.Run("js sdks", func(t *testing.T) {
		if out := node(t, url, key, "defaults.mjs"); !strings.HasSuffix(strings.TrimSpace(out), "ok") {
			t.Fatalf("defaults.mjs:\n%s", out)
		}
	})
}
