package desktop

import (
	"context"
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

// sdkSetup checks what every @e2b/desktop test needs (networks, node,
// the SDK's packages, the default and desktop images: built once per
// machine and shared) and returns node and e2e/e2b, where the scripts
// are.
func sdkSetup(t *testing.T) (node, dir string) {
	t.Helper()
	nettest.Require(t)
	node = testenv.RequireBinary(t, "node")
	dir, err := filepath.Abs("../e2b")
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireFile(t, filepath.Join(dir, "node_modules/@e2b/desktop/package.json")) // npm ci in e2e/e2b (scripts/deps.sh)
	debiantest.Default(t)
	debiantest.Image(t, desktop.ImageConfig(), desktop.Template)
	return node, dir
}

// runSDK runs the script in dir with node against serve at srvURL as key
// (E2B_* from the environment dropped, extra appended), logs its output
// and fails the test unless it ends with "ok". It returns the output.
func runSDK(t *testing.T, node, dir, script, srvURL, key string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2B_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(append(env, "E2B_API_KEY="+key, "E2B_API_URL="+srvURL, "E2B_SANDBOX_URL="+srvURL), extra...)
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", script, out)
	if err != nil || !strings.Contains(string(out), "\nok") {
		t.Fatalf("node %s: %v", script, err)
	}
	return string(out)
}
