package daemon

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/telemetry/export"
)

// TestLimitsReachSandbox checks that Config.Limits (serve's --sandbox-*
// flags) reach the sandboxes: the tmpfs has the disk size and the pids
// limit stops a burst of processes.
func TestLimitsReachSandbox(t *testing.T) {
	needRuntime(t)
	dir := t.TempDir()
	d := start(t, "", Config{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "run"),
		Limits:          contexts.Limits{MemoryBytes: 256 << 20, PIDs: 48, DiskBytes: 24 << 20, CPUs: 0.5},
		ShutdownTimeout: 5 * time.Second, Logger: export.NewLogger(&testenv.Buffer{}, "error")})

	run := func(code string) api.RunCodeResult {
		t.Helper()
		body := `{"conversationId":"limits","args":{"language":"bash","code":` + strconv.Quote(code) + `}}`
		req, _ := http.NewRequest("POST", d.url+"/v1/tools/run_code", strings.NewReader(body))
		req.Header.Set("X-API-KEY", d.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res api.RunCodeResult
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&res) != nil {
			t.Fatalf("run_code %q: status %d", code, resp.StatusCode)
		}
		return res
	}
	if res := run("df -m /tmp | awk 'NR==2 {print $2}'"); strings.TrimSpace(res.Stdout) != "24" {
		t.Errorf("/tmp size = %q MiB, want 24 (DiskBytes)", res.Stdout)
	}
	res := run("for i in $(seq 80); do sleep 2 & done 2>&1 | grep -c 'Resource temporarily unavailable'; wait")
	if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); n == 0 {
		t.Errorf("80 processes under PIDs 48 all started: %+v", res)
	}
}
