package contexts_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// forkFailFake is a provider keeping memory whose ForkCheckpoint does
// what a release does to the source (every connection to it closed) and
// then fails; reconnect says whether it hands back the source connected
// again (the checkpoint failed after the release) or nothing (the
// reconnect failed too). during, when set, runs between the release and
// the failure.
type forkFailFake struct {
	*contextstest.Provider
	reconnect bool
	during    func()

	mu    sync.Mutex
	conns map[string][]contexts.Sandbox
}

func (p *forkFailFake) Capabilities() contexts.Capabilities {
	return p.Provider.Capabilities() | contexts.CapMemory
}

func (p *forkFailFake) keep(sb contexts.Sandbox, err error) (contexts.Sandbox, error) {
	if err == nil {
		p.mu.Lock()
		if p.conns == nil {
			p.conns = map[string][]contexts.Sandbox{}
		}
		p.conns[sb.ID()] = append(p.conns[sb.ID()], sb)
		p.mu.Unlock()
	}
	return sb, err
}

func (p *forkFailFake) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	return p.keep(p.Provider.Create(ctx, spec))
}

func (p *forkFailFake) Attach(ctx context.Context, id string) (contexts.Sandbox, error) {
	return p.keep(p.Provider.Attach(ctx, id))
}

func (p *forkFailFake) ForkCheckpoint(ctx context.Context, id string) (string, contexts.Sandbox, error) {
	p.mu.Lock()
	conns := p.conns[id]
	p.conns[id] = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close() // the agent let go of its channel
	}
	if p.during != nil {
		p.during()
	}
	fail := fmt.Errorf("runsc checkpoint: boom: %w", errdefs.ErrInternal)
	if !p.reconnect {
		return "", nil, fail
	}
	sb, err := p.Attach(ctx, id)
	if err != nil {
		return "", nil, err
	}
	return "", sb, fail
}

// TestForkCheckpointFailureKeepsSource: a fork with memory whose
// checkpoint fails after the source's agent let go of its channel forks
// files, and the source lives on: its next call runs on the same context
// and sandbox, its state not lost (before, the manager kept the closed
// connection and the next call's health check ended the context).
func TestForkCheckpointFailureKeepsSource(t *testing.T) {
	for _, reconnect := range []bool{true, false} {
		t.Run(fmt.Sprintf("reconnected=%v", reconnect), func(t *testing.T) {
			p := &forkFailFake{Provider: contextstest.NewProvider(), reconnect: reconnect}
			m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: &keeper{}})
			ctx := context.Background()
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			a := contexts.Identity{TenantID: "t1", ConversationID: "c", PathID: "main"}
			first, err := m.Execute(ctx, a, contexts.ExecuteRequest{Language: "python", Code: "x = 41"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			fr, err := m.Fork(ctx, "t1", first.ContextID, "branch")
			if err != nil {
				t.Fatalf("fork: %v", err)
			}
			if fr.Memory {
				t.Fatalf("fork says memory though its checkpoint failed")
			}
			got, err := m.Execute(ctx, a, contexts.ExecuteRequest{Language: "python", Code: "print(1)"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.ContextID != first.ContextID || got.SandboxID != first.SandboxID || got.StateLost {
				t.Fatalf("source after a failed fork checkpoint: context %s on %s, state lost %v; want %s on %s, not lost",
					got.ContextID, got.SandboxID, got.StateLost, first.ContextID, first.SandboxID)
			}
		})
	}
}

// TestForkCheckpointCallInFlight: a call in flight on the source when its
// agent lets go of the channel (its connection closed under it) fails
// with a retryable error, and the source is not ended: the next call runs
// on the same context, its state not lost. Before, the call's ping failed
// and the context was ended as lost mid-fork.
func TestForkCheckpointCallInFlight(t *testing.T) {
	p := &forkFailFake{Provider: contextstest.NewProvider(), reconnect: true}
	started, released := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p.Run = func(ctx context.Context, sb *contextstest.Sandbox, rp agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		if rp.Code != "slow" {
			return contextstest.Echo(ctx, sb, rp, out)
		}
		close(started)
		<-released
		return nil, fmt.Errorf("connection closed: %w", errdefs.ErrUnavailable)
	}
	calls := make(chan error, 1)
	p.during = func() {
		once.Do(func() {
			close(released)
			// The call fails and judges its sandbox while the checkpoint
			// is under way.
			<-calls
		})
	}
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: &keeper{}})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	a := contexts.Identity{TenantID: "t1", ConversationID: "c", PathID: "main"}
	first, err := m.Execute(ctx, a, contexts.ExecuteRequest{Language: "python", Code: "x = 41"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var callErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, callErr = m.Execute(ctx, a, contexts.ExecuteRequest{Language: "python", Code: "slow"}, nil)
		calls <- callErr
	}()
	<-started
	if _, err := m.Fork(ctx, "t1", first.ContextID, "branch"); err != nil {
		t.Fatalf("fork: %v", err)
	}
	<-done
	if callErr != nil {
		var f *contexts.Failure
		if errors.As(callErr, &f) && f.StateLost || !errors.Is(callErr, errdefs.ErrUnavailable) {
			t.Fatalf("the call in flight: %v, want a retryable error that loses nothing", callErr)
		}
	}
	got, err := m.Execute(ctx, a, contexts.ExecuteRequest{Language: "python", Code: "print(1)"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.ContextID != first.ContextID || got.SandboxID != first.SandboxID || got.StateLost {
		t.Fatalf("source after a call in flight through its fork checkpoint: context %s on %s, state lost %v; want %s on %s",
			got.ContextID, got.SandboxID, got.StateLost, first.ContextID, first.SandboxID)
	}
}
