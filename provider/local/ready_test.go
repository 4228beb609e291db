package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestReadyPipeGone: the readiness pipe the runtime hands the agent as
// descriptor 4 (runtime/oci ready.go) is gone before any code of the
// sandbox runs: a shell has no descriptor 4 (inherited descriptors keep
// their numbers), and the prestarted python kernel's descriptor 4 is a
// pipe of its own to the agent.
func TestReadyPipeGone(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			p := newProvider(t, kind, contexts.Limits{}, "python")
			c := create(t, p, contexts.Spec{})
			r := sh(t, c, `ls -l /proc/self/fd/ /proc/$$/fd/; if [ -e /proc/$$/fd/4 ]; then echo "fd4: $(readlink /proc/$$/fd/4)"; fi`)
			if r.ExitCode != 0 {
				t.Fatalf("ls: %+v", r)
			}
			t.Logf("shell:\n%s", r.Stdout)
			if strings.Contains(r.Stdout, "fd4: pipe:") {
				t.Errorf("the shell holds a pipe as descriptor 4:\n%s", r.Stdout)
			}
			// The prestarted kernel has pipes of its own to the agent,
			// one of them at 4: any pipe it holds there must be one the
			// agent holds too (the readiness pipe's other end was the host's).
			if r, err := c.RunCode(context.Background(), agentRun("python", "1+1"), nil); err != nil || mainText(r) != "2" {
				t.Fatalf("1+1: %+v, %v", r, err)
			}
			st, err := p.rt.State(context.Background(), c.ID())
			if err != nil || st.PID == 0 {
				t.Fatalf("state: %+v, %v", st, err)
			}
			agentFDs := map[string]bool{}
			fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", st.PID))
			for _, fd := range fds {
				l, _ := os.Readlink(fd)
				agentFDs[l] = true
			}
			kids := testenv.ChildPIDs(st.PID)
			if len(kids) == 0 {
				t.Fatal("no kernel among the init's children")
			}
			for _, pid := range kids {
				if l, err := os.Readlink(fmt.Sprintf("/proc/%s/fd/4", pid)); err == nil && strings.HasPrefix(l, "pipe:") && !agentFDs[l] {
					t.Errorf("process %s holds a pipe as descriptor 4 that the agent does not: %s", pid, l)
				}
			}
		})
	}
}
