// Package testenv lets tests state their preconditions (root, an OCI
// runtime, Postgres, a host tool). A missing precondition skips the test on
// a developer machine and fails it in CI (CI=true), where every
// precondition is installed: a skipped test must never hide a broken CI.
package testenv

import (
	"os"
	"os/exec"
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

// Env requires an environment variable and returns its value.
func Env(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	Require(t, v != "", name+" set")
	return v
}
