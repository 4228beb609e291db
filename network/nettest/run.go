package nettest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/internal/testenv"
)

// Result is what a command run in a sandbox's namespace produced.
type Result struct {
	Stdout, Stderr string
	Err            error
}

// Run runs a command inside the network namespace at ns, as a program in
// the sandbox would: in a private mount namespace whose /etc/resolv.conf
// is resolvConf. It uses nsenter and unshare (util-linux).
func Run(t testing.TB, ns string, resolvConf []byte, name string, args ...string) Result {
	t.Helper()
	RequireTools(t)
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, resolvConf, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	script := `mount --bind "$0" /etc/resolv.conf && exec "$@"`
	full := append([]string{"--net=" + ns, "--", "unshare", "--mount", "--propagation", "private", "sh", "-c", script, conf, name}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return Result{Stdout: out.String(), Stderr: errb.String(), Err: err}
}

// RequireTools requires the binaries the sandbox clients use.
func RequireTools(t testing.TB) {
	t.Helper()
	testenv.RequireBinary(t, "nsenter")
	testenv.RequireBinary(t, "unshare")
	testenv.RequireBinary(t, "curl")
}
