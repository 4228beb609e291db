package contexts_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// liveProvider hands out fake sandboxes whose connection reports its
// closing (Done), like *agent.Client, and counts pings.
type liveProvider struct {
	*contextstest.Provider
	pings atomic.Int64
	// inBand: the sandboxes probe in band (agent.WithProbe); probed
	// counts the calls that came with the probe.
	inBand bool
	probed atomic.Int64
	mu     sync.Mutex
	conns  map[string]*liveSandbox
}

type liveSandbox struct {
	contexts.Sandbox
	p       *liveProvider
	done    chan struct{}
	once    sync.Once
	notSent atomic.Bool // RunCode fails as a request that never left
}

func (s *liveSandbox) Done() <-chan struct{} { return s.done }

func (s *liveSandbox) Ping(ctx context.Context) error {
	s.p.pings.Add(1)
	return s.Sandbox.Ping(ctx)
}

func (s *liveSandbox) ProbesInBand() bool { return s.p.inBand }

func (s *liveSandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
	if agent.Probed(ctx) {
		s.p.probed.Add(1)
	}
	if s.notSent.Load() {
		return nil, fmt.Errorf("run_code: %w: connection reset: %w", agent.ErrNotSent, errdefs.ErrUnavailable)
	}
	return s.Sandbox.RunCode(ctx, p, out)
}

func (s *liveSandbox) Close() error {
	s.once.Do(func() { close(s.done) })
	return s.Sandbox.Close()
}

func (p *liveProvider) wrap(sb contexts.Sandbox, err error) (contexts.Sandbox, error) {
	if err != nil {
		return nil, err
	}
	ls := &liveSandbox{Sandbox: sb, p: p, done: make(chan struct{})}
	p.mu.Lock()
	p.conns[sb.ID()] = ls
	p.mu.Unlock()
	return ls, nil
}

func (p *liveProvider) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	return p.wrap(p.Provider.Create(ctx, spec))
}

func (p *liveProvider) Attach(ctx context.Context, id string) (contexts.Sandbox, error) {
	return p.wrap(p.Provider.Attach(ctx, id))
}

func (p *liveProvider) conn(id string) *liveSandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[id]
}

func newLiveEnv(t *testing.T, cfg contexts.Config) (*contexts.Manager, *liveProvider) {
	t.Helper()
	lp := &liveProvider{Provider: contextstest.NewProvider(), conns: map[string]*liveSandbox{}}
	cfg.PoolSize = -1
	cfg.CleanupInterval = time.Hour
	m := contexts.NewManager(memory.New(), lp, cfg)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m, lp
}

func liveExec(t *testing.T, m *contexts.Manager, code string) *contexts.ExecuteResult {
	t.Helper()
	res, err := m.Execute(context.Background(), ident("t1", "c1", "main"), contexts.ExecuteRequest{Language: "python", Code: code}, nil)
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	return res
}

// TestHealthCheckSkippedWhileAlive: a reuse right after the sandbox
// answered, on an open connection, skips the ping; a negative interval
// pings every time, and so does a reuse after the interval.
func TestHealthCheckSkippedWhileAlive(t *testing.T) {
	m, lp := newLiveEnv(t, contexts.Config{HealthCheckInterval: time.Hour})
	liveExec(t, m, "x = 1")
	lp.pings.Store(0)
	for range 5 {
		liveExec(t, m, "x")
	}
	if n := lp.pings.Load(); n != 0 {
		t.Fatalf("5 calls right after an answer pinged %d times", n)
	}

	m, lp = newLiveEnv(t, contexts.Config{HealthCheckInterval: -1})
	liveExec(t, m, "x = 1")
	lp.pings.Store(0)
	for range 5 {
		liveExec(t, m, "x")
	}
	if n := lp.pings.Load(); n != 5 {
		t.Fatalf("HealthCheckInterval < 0: 5 reuses pinged %d times", n)
	}

	m, lp = newLiveEnv(t, contexts.Config{HealthCheckInterval: time.Millisecond})
	liveExec(t, m, "x = 1")
	lp.pings.Store(0)
	time.Sleep(5 * time.Millisecond)
	liveExec(t, m, "x")
	if n := lp.pings.Load(); n != 1 {
		t.Fatalf("a reuse past the interval pinged %d times", n)
	}
}

// TestHealthCheckInBand: a warm Execute on a sandbox whose connection
// probes in band (agent.WithProbe) sends its request with the probe and
// skips the ping before it (its round trip was a third of a warm call); a
// shared provider's (a pod's connection) or a connection without the
// probe is pinged on every reuse.
func TestHealthCheckInBand(t *testing.T) {
	for _, tc := range []struct {
		name           string
		shared, inBand bool
		pings, probed  int64
	}{
		{"local, in band", false, true, 0, 5},
		{"shared, in band", true, true, 5, 0},
		{"local, no probe", false, false, 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := contextstest.NewProvider()
			fake.Shared = tc.shared
			lp := &liveProvider{Provider: fake, conns: map[string]*liveSandbox{}, inBand: tc.inBand}
			m := contexts.NewManager(memory.New(), lp, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour})
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close(context.Background()) })
			liveExec(t, m, "x = 1")
			lp.pings.Store(0)
			lp.probed.Store(0)
			for range 5 {
				liveExec(t, m, "x")
			}
			if n, p := lp.pings.Load(), lp.probed.Load(); n != tc.pings || p != tc.probed {
				t.Fatalf("5 warm reuses pinged %d times and probed %d, want %d and %d", n, p, tc.pings, tc.probed)
			}
		})
	}
}

// TestHealthCheckClosedConnection: a closed connection is never taken as
// alive: the reuse pings, the ping fails, and the call runs in a fresh
// context transparently.
func TestHealthCheckClosedConnection(t *testing.T) {
	m, lp := newLiveEnv(t, contexts.Config{HealthCheckInterval: time.Hour})
	old := liveExec(t, m, "x = 1")
	lp.Kill(old.SandboxID)
	c := lp.conn(old.SandboxID)
	c.once.Do(func() { close(c.done) })
	lp.pings.Store(0)
	res := liveExec(t, m, "print('fresh')")
	if res.ContextID == old.ContextID || res.Stdout != "fresh\n" || lp.pings.Load() != 1 {
		t.Fatalf("after the connection closed: %+v (pings %d)", res, lp.pings.Load())
	}
	if st := m.Stats(); st.HealthCheckFailures != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestNotSentRunsInFreshSandbox: the ping was skipped, the sandbox died
// before its connection reported it, and the request provably never left
// (agent.ErrNotSent): that is a failed health check, and the call runs in a
// fresh context. A request that did leave is never re-run.
func TestNotSentRunsInFreshSandbox(t *testing.T) {
	m, lp := newLiveEnv(t, contexts.Config{HealthCheckInterval: time.Hour})
	old := liveExec(t, m, "x = 1")
	lp.Kill(old.SandboxID)
	lp.conn(old.SandboxID).notSent.Store(true)
	res := liveExec(t, m, "print('fresh')")
	if res.ContextID == old.ContextID || res.Stdout != "fresh\n" {
		t.Fatalf("after a request that was never sent: %+v", res)
	}
	if st := m.Stats(); st.HealthCheckFailures != 1 || st.Active != 1 {
		t.Fatalf("stats = %+v", st)
	}

	// Sent, then the sandbox died: the call fails; the next is fresh.
	lp.Kill(res.SandboxID)
	_, err := m.Execute(context.Background(), ident("t1", "c1", "main"), contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
	wantCategory(t, err, errdefs.ErrUnavailable)
	again := liveExec(t, m, "print('again')")
	if again.ContextID == res.ContextID {
		t.Fatalf("after a lost call: %+v", again)
	}

}
