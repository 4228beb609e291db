package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// -h prints the flags and exits 0 without running the command: serve and
// mcp must not start a daemon when asked for help.
func TestHelpDoesNotRun(t *testing.T) {
	for _, name := range []string{"serve", "mcp", "exec", "tenant", "tenant create"} {
		t.Run(name, func(t *testing.T) {
			var out, errw bytes.Buffer
			err := Run(context.Background(), append(strings.Fields(name), "-h"), strings.NewReader(""), &out, &errw)
			if err != nil {
				t.Fatalf("%s -h: %v", name, err)
			}
			if !strings.Contains(errw.String()+out.String(), "-") {
				t.Errorf("%s -h printed no usage", name)
			}
			if strings.Contains(out.String(), "listening") {
				t.Errorf("%s -h started the daemon: %s", name, out.String())
			}
		})
	}
}
