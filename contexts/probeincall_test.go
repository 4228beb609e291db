package contexts_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

func (s *liveSandbox) Exec(ctx context.Context, p agent.ExecParams, out contexts.OutputFunc) (*agent.ExecResult, error) {
	if agent.Probed(ctx) {
		s.p.probed.Add(1)
	}
	if s.notSent.Load() {
		return nil, fmt.Errorf("exec: %w: connection reset: %w", agent.ErrNotSent, errdefs.ErrUnavailable)
	}
	return s.Sandbox.Exec(ctx, p, out)
}

// useExec runs echo through Use on the context named id, the way the E2B
// surface starts a process.
func useExec(ctx context.Context, m *contexts.Manager, contextID string) error {
	return m.Use(ctx, ident("t1", "c1", "main"), contexts.CreateOptions{ContextID: contextID}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		_, err := sb.Exec(ctx, agent.ExecParams{Shell: "echo ok"}, nil)
		return err
	})
}

// TestUseProbeInCall: a Use marked ProbeInCall on a context it names
// skips the ping before its callback where the connection probes in band
// and the provider is not shared; its calls carry the probe instead.
// Unmarked, without ContextID, or on a shared provider, it pings as before.
func TestUseProbeInCall(t *testing.T) {
	for _, tc := range []struct {
		name             string
		shared, mark, id bool
		pings, probed    int64
	}{
		{"local, marked", false, true, true, 0, 5},
		{"local, unmarked", false, false, true, 5, 0},
		{"local, marked, no context id", false, true, false, 5, 0},
		{"shared, marked", true, true, true, 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := contextstest.NewProvider()
			fake.Shared = tc.shared
			lp := &liveProvider{Provider: fake, conns: map[string]*liveSandbox{}, inBand: true}
			m := contexts.NewManager(memory.New(), lp, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour})
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close(context.Background()) })
			rec := liveExec(t, m, "x = 1")
			ctx := context.Background()
			if tc.mark {
				ctx = contexts.ProbeInCall(ctx)
			}
			id := ""
			if tc.id {
				id = rec.ContextID
			}
			lp.pings.Store(0)
			lp.probed.Store(0)
			for range 5 {
				if err := useExec(ctx, m, id); err != nil {
					t.Fatal(err)
				}
			}
			if n, p := lp.pings.Load(), lp.probed.Load(); n != tc.pings || p != tc.probed {
				t.Fatalf("5 uses pinged %d times and probed %d, want %d and %d", n, p, tc.pings, tc.probed)
			}
		})
	}
}

// TestUseProbeInCallDeadSandbox: the probe finds the sandbox dead (the
// request never left): the call fails with unavailable as a lost sandbox,
// the context ends, and a failed health check is counted, as when the
// ping before the call failed.
func TestUseProbeInCallDeadSandbox(t *testing.T) {
	m, lp := newLiveEnv(t, contexts.Config{})
	lp.inBand = true
	rec := liveExec(t, m, "x = 1")
	lp.Kill(rec.SandboxID)
	c := lp.conn(rec.SandboxID)
	c.notSent.Store(true)
	err := useExec(contexts.ProbeInCall(context.Background()), m, rec.ContextID)
	wantCategory(t, err, errdefs.ErrUnavailable)
	if f, ok := contexts.AsFailure(err); !ok || f.Kind != contexts.FailureLost {
		t.Fatalf("error %v is not a lost sandbox's failure", err)
	}
	if st := m.Stats(); st.HealthCheckFailures != 1 || st.Active != 0 {
		t.Fatalf("stats = %+v", st)
	}
	if err := useExec(contexts.ProbeInCall(context.Background()), m, rec.ContextID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a Use of the ended context: %v, want not_found", err)
	}
}
