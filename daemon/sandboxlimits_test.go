package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/telemetry/export"
)

// TestServeLimitsReachSandbox checks that serve's --sandbox-* flags reach
// the sandboxes: the tmpfs has the --sandbox-disk size and the pids limit
// stops a burst of processes.
func TestServeLimitsReachSandbox(t *testing.T) {
	lrunNeedAgent(t)
	ctx := context.Background()
	dir := t.TempDir()
	d, err := startDaemon(ctx, serveConfig{store: storeFlags{dataDir: filepath.Join(dir, "data")}, runtime: "auto",
		stateDir: filepath.Join(dir, "run"), providers: "local", memoryMiB: 256, pids: 48, diskMiB: 24, cpus: 0.5,
		poolSize: 0, shutdownTimeout: 5 * time.Second}, export.NewLogger(&lockedBuffer{}, "error"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()

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
		t.Errorf("/tmp size = %q MiB, want 24 (--sandbox-disk)", res.Stdout)
	}
	res := run("for i in $(seq 80); do sleep 2 & done 2>&1 | grep -c 'Resource temporarily unavailable'; wait")
	if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); n == 0 {
		t.Errorf("80 processes under --sandbox-pids 48 all started: %+v", res)
	}
}

func TestServeLimitsDefaultsAreZero(t *testing.T) {
	var c serveConfig
	if l := c.limits(); l.MemoryBytes != 0 || l.PIDs != 0 || l.CPUs != 0 || l.DiskBytes != 0 {
		t.Fatalf("unset flags must keep the provider defaults, got %+v", l)
	}
	c = serveConfig{memoryMiB: 512, pids: 100, cpus: 1.5, diskMiB: 64}
	if l := c.limits(); l.MemoryBytes != 512<<20 || l.PIDs != 100 || l.CPUs != 1.5 || l.DiskBytes != 64<<20 {
		t.Fatalf("limits() = %+v", l)
	}
}
