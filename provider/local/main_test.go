package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/runtime/oci"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}

// helperEnv makes the test binary a short-lived "daemon" for TestRestart:
// it creates a sandbox in the state dir named by the variable, sets
// x = 42 in python, prints the sandbox id and exits.
const helperEnv = "SANDLOT_LOCAL_TEST_HELPER"

// helperRuntimeEnv is the helper daemon's runtime (default auto).
const helperRuntimeEnv = "SANDLOT_LOCAL_TEST_HELPER_RUNTIME"

func helperMain() int {
	p, err := New(Config{Runtime: os.Getenv(helperRuntimeEnv), StateDir: os.Getenv(helperEnv), AgentPath: os.Getenv(AgentEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	sb, err := p.Create(ctx, contexts.Spec{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r, err := sb.RunCode(ctx, agentRun("python", "x = 42"), nil)
	if err != nil || !r.Success {
		fmt.Fprintln(os.Stderr, "x = 42:", r, err)
		return 1
	}
	fmt.Println(sb.ID())
	return 0
}

// testKinds are the runtimes the per-runtime tests cover. newProvider skips
// a kind that is not installed (in CI, where scripts/deps.sh installs all
// three, it fails).
var testKinds = []string{"crun", "runc", "runsc"}

// newProvider returns a provider on runtime kind with a private state dir;
// it destroys whatever is left when the test ends.
func newProvider(t testing.TB, kind string, lim contexts.Limits, prestart ...string) *Provider {
	t.Helper()
	return newProviderWith(t, Config{Runtime: kind, Limits: lim, Prestart: prestart})
}

// newProviderWith is newProvider with cfg's other fields (images,
// templates, a Logger: nil discards); StateDir and AgentPath are the
// test's.
func newProviderWith(t testing.TB, cfg Config) *Provider {
	t.Helper()
	testenv.RequireRoot(t)
	if cfg.Runtime != "" && cfg.Runtime != "auto" {
		testenv.RequireBinary(t, cfg.Runtime)
	}
	dir, err := os.MkdirTemp("", "sl-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir, cfg.AgentPath = dir, testenv.AgentBinary(t)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := New(cfg)
	if err != nil {
		oci.Purge(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := p.List(context.Background())
		for _, id := range ids {
			if err := p.Destroy(context.Background(), id); err != nil {
				t.Errorf("destroy %s: %v", id, err)
			}
		}
		if err := oci.Purge(dir); err != nil {
			t.Errorf("purge state dir: %v", err)
		}
	})
	return p
}

// create makes a sandbox and closes its client at the end of the test.
func create(t testing.TB, p *Provider, spec contexts.Spec) *agent.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb.(*Sandbox).Client
}

// sh runs a shell command in the sandbox.
func sh(t testing.TB, c *agent.Client, cmd string) *agent.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := c.Exec(ctx, agent.ExecParams{Shell: cmd, TimeoutMs: 30000}, nil)
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return r
}

// runCode runs code in a kernel.
func runCode(t testing.TB, c *agent.Client, lang, code string) *agent.RunCodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := c.RunCode(ctx, agent.RunCodeParams{Language: lang, Code: code, TimeoutMs: 20000}, nil)
	if err != nil {
		t.Fatalf("run %s %q: %v", lang, code, err)
	}
	return r
}

// mainText is the text of the main result, or "".
func mainText(r *agent.RunCodeResult) string {
	for _, x := range r.Results {
		if x.Main {
			return x.Text
		}
	}
	return ""
}

func agentRun(lang, code string) agent.RunCodeParams {
	return agent.RunCodeParams{Language: lang, Code: code, TimeoutMs: 20000}
}
