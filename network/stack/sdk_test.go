package stack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
)

// sdkDir is e2e/e2b, where the official E2B SDKs are installed (npm ci,
// scripts/deps.sh); it requires node and the SDK.
func sdkDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../e2e/e2b")
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireBinary(t, "node")
	testenv.RequireFile(t, filepath.Join(dir, "node_modules/e2b/package.json")) // npm ci in e2e/e2b (scripts/deps.sh)
	return dir
}

// runSDK runs one of e2e/e2b's node scripts against a daemon, with the
// host's environment minus its E2B_ settings plus env, and returns its
// output; the script passed when it exits 0 with "ok" as its last word.
func runSDK(t *testing.T, script string, timeout time.Duration, env ...string) (string, bool) {
	t.Helper()
	dir := sdkDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2B_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out) + "\n" + err.Error(), false
	}
	return string(out), strings.HasSuffix(strings.TrimSpace(string(out)), "ok")
}

// mustRunSDK is runSDK that fails the test when the script does not pass.
func mustRunSDK(t *testing.T, script string, timeout time.Duration, env ...string) {
	t.Helper()
	if out, ok := runSDK(t, script, timeout, env...); !ok {
		t.Fatalf("node %s:\n%s", script, out)
	}
}
