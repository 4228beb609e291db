package contexts_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestRealUseProbeInCall: on the local provider, a Use marked
// ProbeInCall runs its exec on a live sandbox; on a sandbox killed behind
// the manager's back, the call fails and the context ends with error, one
// failed health check counted: with unavailable when the probe riding on
// the exec request found it dead, with not_found (the context named is
// gone, as before) when its connection had closed already and the ping
// before the callback ran instead.
func TestRealUseProbeInCall(t *testing.T) {
	e := newRealEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	old := e.exec(id, "python", "x = 1")
	use := func() (string, error) {
		var out string
		err := e.m.Use(contexts.ProbeInCall(e.ctx), id, contexts.CreateOptions{ContextID: old.ContextID}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
			r, err := sb.Exec(ctx, agent.ExecParams{Argv: []string{"echo", "ok"}}, nil)
			if r != nil {
				out = r.Stdout
			}
			return err
		})
		return out, err
	}
	if out, err := use(); err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("Use on a live sandbox: %q, %v", out, err)
	}
	if err := e.p.Runtime().Kill(e.ctx, old.SandboxID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := e.p.Runtime().State(e.ctx, old.SandboxID)
		if err != nil || st.Status != "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// unavailable: the probe in the call found the agent gone; not_found:
	// the client had seen its connection end before the call, and the
	// context was ended without a call. Either ends the context once.
	_, err := use()
	if !errors.Is(err, errdefs.ErrUnavailable) && !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Use on a killed sandbox: %v, want unavailable or not_found", err)
	}
	t.Logf("Use on the killed sandbox: %v", err)
	rec, err := e.m.Get(e.ctx, "t1", old.ContextID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != contexts.StateError {
		t.Fatalf("killed context: %+v", rec)
	}
	if st := e.m.Stats(); st.HealthCheckFailures != 1 {
		t.Fatalf("stats = %+v", st)
	}
}
