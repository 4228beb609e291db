// Package testenv lets tests state their preconditions (root, an OCI
// runtime, Postgres, a host tool). A missing precondition skips the test on
// a developer machine and fails it in CI (CI=true), where every
// precondition is installed: a skipped test must never hide a broken CI.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// InCI reports whether the tests run in CI.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require skips (or, in CI, fails) t unless ok. what names the precondition.
func Require(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatalf("precondition missing in CI: %s", what)
	}
	t.Skipf("precondition missing: %s", what)
}

// RequireRoot requires uid 0.
func RequireRoot(t testing.TB) {
	t.Helper()
	Require(t, os.Geteuid() == 0, "running as root")
}

// RequireBinary requires an executable on PATH (or an absolute path) and
// returns its path.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	Require(t, err == nil, name+" installed")
	return p
}

// RequireFile requires a file (a header, a data file) a test reads from
// the host; scripts/deps.sh must have a file: row for it.
func RequireFile(t testing.TB, path string) {
	t.Helper()
	_, err := os.Stat(path)
	Require(t, err == nil, path+" present (see scripts/deps.sh for its package)")
}

// Env requires an environment variable and returns its value.
func Env(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	Require(t, v != "", name+" set")
	return v
}

// RequireOCIRuntime requires what the local provider needs to run a
// sandbox: root, and crun or runc on PATH.
func RequireOCIRuntime(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	_, crunErr := exec.LookPath("crun")
	_, runcErr := exec.LookPath("runc")
	Require(t, crunErr == nil || runcErr == nil, "crun or runc installed")
}

var agentBuild, podAgentBuild, sandlotBuild build

// AgentBinary returns the static sandlot-agent that sandboxes run:
// $SANDLOT_AGENT_BIN (make test sets it), else a build of cmd/sandlot-agent
// made once per test process. A failed build fails t.
func AgentBinary(t testing.TB) string {
	t.Helper()
	return agentBuild.binary(t, "SANDLOT_AGENT_BIN", "sandlot-agent", "CGO_ENABLED=0")
}

// PodAgentBinary returns the static sandlot-pod-agent that pod images
// carry: $SANDLOT_POD_AGENT_BIN (make test sets it), else a build of
// cmd/sandlot-pod-agent made once per test process.
func PodAgentBinary(t testing.TB) string {
	t.Helper()
	return podAgentBuild.binary(t, "SANDLOT_POD_AGENT_BIN", "sandlot-pod-agent", "CGO_ENABLED=0")
}

// SandlotBinary returns the sandlot binary: $SANDLOT_BIN (make test sets
// it), else a build of cmd/sandlot made once per test process.
func SandlotBinary(t testing.TB) string {
	t.Helper()
	return sandlotBuild.binary(t, "SANDLOT_BIN", "sandlot")
}

// build is one command of this module, built at most once per process. The
// binary stays in a temp dir for the life of the process (a test helper has
// no hook at process exit).
type build struct {
	once sync.Once
	path string
	err  error
}

func (b *build) binary(t testing.TB, env, cmd string, buildEnv ...string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", cmd+"-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, cmd)
		c := exec.Command("go", "build", "-trimpath", "-o", b.path, "github.com/sandlot/sandlot/cmd/"+cmd)
		c.Env = append(os.Environ(), buildEnv...)
		if out, err := c.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", cmd, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
