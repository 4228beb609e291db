//go:build pythonsdk

package python

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/nettest"
)

// daemons are the `sandlot serve` configurations the suite runs against.
// The Python SDK asks for the open internet on every create
// (allow_internet_access: true, its default): a daemon with default
// settings meets it with no network, one with sandbox networks and a cap
// that allows mode open with mode open. internet is what the suite's
// Network case expects (SANDLOT_INTERNET).
var daemons = []struct {
	name     string
	flags    []string
	internet string
}{
	{"default settings", nil, "none"},
	{"network opt-ins", []string{"--network", "--network-allow-open", "--network-spares", "0", "--network-upstream", "127.0.0.1:9"}, "open"},
}

// TestPythonSDK runs sdk_suite.py with the official E2B Python SDKs,
// configured only through E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL,
// against a real `sandlot serve` on the local provider. A failing case
// fails the test.
func TestPythonSDK(t *testing.T) {
	testenv.RequireRoot(t)
	nettest.Require(t)
	testenv.RequireBinary(t, "unshare")
	py := testenv.RequireBinary(t, "/usr/bin/python3")
	site := sdkSite(t)
	bin := testenv.SandlotBinary(t)
	for _, d := range daemons {
		t.Run(d.name, func(t *testing.T) {
			url, key := serve(t, bin, d.flags...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			args := []string{"-m", "unittest", "-v", "sdk_suite"}
			if f := os.Getenv("E2E_FILTER"); f != "" {
				args = append(args, "-k", f)
			}
			cmd := exec.CommandContext(ctx, py, args...)
			cmd.Env = append(os.Environ(), "PYTHONPATH="+site, "PYTHONDONTWRITEBYTECODE=1",
				"E2B_API_KEY="+key, "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_DEBUG=", "E2B_DOMAIN=",
				"SANDLOT_INTERNET="+d.internet)
			out, err := cmd.CombinedOutput()
			t.Logf("python -m unittest sdk_suite:\n%s", out)
			if err != nil {
				t.Fatalf("the Python SDK suite failed: %v", err)
			}
			if !strings.Contains(string(out), "\nOK") {
				t.Fatal("the Python SDK suite did not report OK")
			}
		})
	}
}

// sdkSite is the directory scripts/e2b-python.sh installed the SDKs in.
func sdkSite(t *testing.T) string {
	t.Helper()
	script := filepath.Join("..", "..", "..", "scripts", "e2b-python.sh")
	b, err := exec.Command(script, "dir").Output()
	if err != nil {
		t.Fatalf("%s dir: %v", script, err)
	}
	dir := strings.TrimSpace(string(b))
	testenv.Require(t, exec.Command(script, "check").Run() == nil,
		fmt.Sprintf("the E2B Python SDKs installed in %s (scripts/e2b-python.sh install, which scripts/deps.sh test runs given SANDLOT_E2B_GIT and SANDLOT_CODE_INTERPRETER_GIT)", dir))
	return filepath.Join(dir, "site")
}

// serve starts `sandlot serve` with extra flags on a fresh data dir, in a
// mount namespace with a private /run/sandlot (sandbox networks keep their
// host lock and namespaces there), and returns its URL and the bootstrap
// tenant's key.
func serve(t *testing.T, bin string, extra ...string) (string, string) {
	t.Helper()
	debiantest.Default(t) // the default template, from the tests' shared image store
	data := t.TempDir()
	state, err := os.MkdirTemp("", "sl-py-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) }) // registered first: runs after serve stopped
	args := append([]string{bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", data, "--state-dir", state,
		"--pool-size", "0", "--providers", "local", "--images-dir", debiantest.StoreDir()}, extra...)
	const private = `mkdir -p /run/sandlot && mount -t tmpfs -o mode=0700 sandlot-test /run/sandlot && exec "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "/bin/sh", "-c", private, "sh"}, args...)...)
	cmd.Env = append(os.Environ(), "SANDLOT_ADDR=")
	srv := testenv.StartServe(t, cmd, data, 90*time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sandlot serve stderr:\n%s", srv.Log())
		}
		if !srv.Exited() {
			srv.Stop(t, 30*time.Second)
		}
	})
	b, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatalf("bootstrap key: %v", err)
	}
	return srv.URL, strings.TrimSpace(string(b))
}
