package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/telemetry/export"
)

// TestNoProviderNoTools: a daemon that found no usable sandbox provider
// stays up (health, audit, tenants) but lists no tool, and a tool call
// answers 503 with the reason.
func TestNoProviderNoTools(t *testing.T) {
	dir := t.TempDir()
	d := start(t, "", Config{DataDir: filepath.Join(dir, "data"), Runtime: "no-such-runtime",
		StateDir: filepath.Join(dir, "run"), ShutdownTimeout: 5 * time.Second, Logger: export.NewLogger(&testenv.Buffer{}, "info")})
	call := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, d.url+path, strings.NewReader(body))
		req.Header.Set("X-API-KEY", d.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	st, b := call("GET", "/v1/tools", "")
	var list []json.RawMessage
	if st != http.StatusOK || json.Unmarshal(b, &list) != nil || len(list) != 0 {
		t.Fatalf("GET /v1/tools: %d %s; want 200 and no tools", st, b)
	}
	st, b = call("POST", "/v1/tools/run_code", `{"args":{"language":"python","code":"1"}}`)
	if st != http.StatusServiceUnavailable || !strings.Contains(string(b), "no usable sandbox provider") {
		t.Fatalf("run_code: %d %s; want 503 naming the reason", st, b)
	}
}
