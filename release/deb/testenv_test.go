package deb

import (
	"os"
	"os/exec"
	"testing"
)

// requireBinary returns the path of name on PATH. Without it the test is
// skipped on a developer's machine and fails under CI=true, where every
// precondition must be installed (scripts/deps.sh test).
func requireBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, name+" is not installed: "+err.Error())
	}
	return p
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "needs root")
	}
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}
