package e2b

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestCommandsSurviveRestart starts background commands through the
// official SDK, restarts `sandlot serve` (SIGTERM, then a new process on
// the same data and state dirs) while they run, and checks through the SDK
// against the new process that they are listed, that commands.connect(pid)
// gets their output (what they printed while no daemon ran included) and
// exit code, that kill(pid) ends one, and that the sandbox's kernel state
// is there (restart.mjs).
func TestCommandsSurviveRestart(t *testing.T) {
	t.Parallel()
	npmReady(t)
	testenv.RequireRoot(t)
	bin := testenv.SandlotBinary(t)
	data := t.TempDir()
	state, err := os.MkdirTemp("", "sl-restart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })

	url, key := serveIn(t, bin, data, state)
	before := strings.TrimSpace(node(t, url, key, "restart.mjs", "before"))
	lines := strings.Split(before, "\n")
	ids := lines[len(lines)-1]
	t.Logf("before the restart: %s", ids)
	stopServe(t, url)
	time.Sleep(2 * time.Second) // the commands print while no daemon runs
	url, key = serveIn(t, bin, data, state)
	if out := node(t, url, key, "restart.mjs", "after", ids); !strings.Contains(out, "after: ok") {
		t.Fatalf("after the restart:\n%s", out)
	}
}

// node runs one script with the SDK pointed at url and returns its output.
func node(t *testing.T, url, key string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Env = append(os.Environ(), "E2B_API_KEY="+key, "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_DEBUG=")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// serves maps the URL of each serve serveIn started to it, for stopServe.
var serves = map[string]*testenv.Serve{}

// serveIn starts `sandlot serve` on the given data and state dirs.
func serveIn(t *testing.T, bin, data, state string) (string, string) {
	t.Helper()
	url, key, srv := startServe(t, bin, data, state)
	serves[url] = srv
	return url, key
}

func stopServe(t *testing.T, url string) {
	t.Helper()
	serves[url].Stop(t, 60*time.Second)
	delete(serves, url)
}
