package contexts_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// TestRealUseDiedUnder: a command whose sandbox is killed under it (the
// bash tool's and E2B's path, Use) fails as a FailureLost with StateLost:
// Use found the sandbox dead and ended the context; the next call is
// fresh and not told again.
func TestRealUseDiedUnder(t *testing.T) {
	e := newRealEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "python", "x = 1")
	done := make(chan error, 1)
	go func() {
		done <- e.m.Use(e.ctx, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
			_, err := sb.Exec(ctx, agent.ExecParams{Shell: "sleep 30", TimeoutMs: 60_000}, nil)
			return err
		})
	}()
	waitRunning(t, e, first.SandboxID, "sleep 30")
	if err := e.p.Runtime().Kill(e.ctx, first.SandboxID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if f, ok := contexts.AsFailure(err); !ok || f.Kind != contexts.FailureLost || !f.StateLost {
			t.Fatalf("Use whose sandbox was killed under it: %v, want a FailureLost with StateLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Use did not notice its sandbox died")
	}
	if r, _ := e.m.Get(e.ctx, "t1", first.ContextID); r.State != contexts.StateError {
		t.Fatalf("the killed sandbox's context: %+v", r)
	}
	if res := e.exec(id, "python", "print('fresh')"); res.SandboxID == first.SandboxID || res.StateLost {
		t.Fatalf("the call after: %+v", res)
	}
}

// waitRunning waits until a process whose command line holds cmd runs in
// sandbox id.
func waitRunning(t *testing.T, e *realEnv, id, cmd string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var found bool
		e.m.Use(e.ctx, ident("t1", "c1", "main"), contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
			ps, err := sb.Processes(ctx)
			for _, p := range ps {
				found = found || strings.Contains(strings.Join(p.Argv, " "), cmd)
			}
			return err
		})
		if found {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%q never ran in %s", cmd, id)
}
