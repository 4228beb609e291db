package cli

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestBinaryShowsCause: the sandlot binary prints the whole error of a
// failed command, not a bare "internal error", so the operator sees why.
func TestBinaryShowsCause(t *testing.T) {
	bin := testenv.SandlotBinary(t)
	out, err := exec.Command(bin, "run", "--state-dir", "/proc/sandlot-nope", "--lang", "python", "1").CombinedOutput()
	if err == nil {
		t.Fatalf("run with an impossible state dir succeeded: %s", out)
	}
	msg := string(out)
	if !strings.Contains(msg, "/proc/sandlot-nope") || strings.TrimSpace(msg) == "sandlot: internal error" {
		t.Fatalf("stderr does not name the cause: %q", msg)
	}
}
