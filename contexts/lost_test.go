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
)

// The rule for a lost sandbox (docs/contexts.md, "A lost sandbox"): a loss
// found before the call's code started is replaced and the call runs once
// in the fresh sandbox, its result saying StateLost; a loss while the call
// runs fails that call as a Failure with StateLost, and the code is never
// run a second time. One call reports each loss.

// TestLostBeforeTheCallIsReplacedAndTold: a sandbox that died between
// calls is found by the reuse's health check; the call runs in a fresh
// context and says StateLost, once.
func TestLostBeforeTheCallIsReplacedAndTold(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	old := e.exec(id, "x = 1")
	if old.StateLost {
		t.Fatalf("first call of a conversation: %+v", old)
	}
	e.p.Kill(old.SandboxID)
	res := e.exec(id, "print('fresh')")
	if !res.StateLost || res.ContextID == old.ContextID || res.Stdout != "fresh\n" {
		t.Fatalf("after a kill: %+v, want the call run in a fresh context with StateLost", res)
	}
	if next := e.exec(id, "1"); next.StateLost || next.ContextID != res.ContextID {
		t.Fatalf("the call after: %+v, want the same context and no StateLost", next)
	}
	if got := e.p.Created(); got != 2 {
		t.Fatalf("created %d sandboxes, want 2", got)
	}
}

// TestLostDuringTheCallIsNotRerun: the sandbox dies while the code runs:
// the call fails as a Failure with StateLost, the code ran once, and the
// next call starts fresh without being told a second time.
func TestLostDuringTheCallIsNotRerun(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	runs := 0
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		runs++
		e.p.Kill(sb.ID())
		return nil, fmt.Errorf("sandbox %s: agent connection lost: EOF: %w", sb.ID(), errdefs.ErrUnavailable)
	}
	_, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "send_the_email()"}, nil)
	f, ok := contexts.AsFailure(err)
	if !ok || f.Kind != contexts.FailureLost || !f.StateLost || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Execute = %v, want a FailureLost with StateLost", err)
	}
	if runs != 1 {
		t.Fatalf("the code ran %d times, want once", runs)
	}
	e.p.Run = nil
	res := e.exec(id, "print('again')")
	if res.ContextID == first.ContextID || res.StateLost || res.Stdout != "again\n" {
		t.Fatalf("the call after the failed one: %+v, want a fresh context, the loss already told", res)
	}

	// A call failing in transit while the sandbox still answers keeps the
	// context: a FailureLost without StateLost.
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		return nil, fmt.Errorf("connection reset: %w", errdefs.ErrUnavailable)
	}
	_, err = e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil)
	if f, ok := contexts.AsFailure(err); !ok || f.StateLost {
		t.Fatalf("a call failed in transit on a live sandbox: %v (StateLost %v)", err, ok && f.StateLost)
	}
	e.p.Run = nil
	if again := e.exec(id, "1"); again.ContextID != res.ContextID {
		t.Fatalf("the context did not survive a transit failure: %+v", again)
	}
}

// TestNotSentIsToldLost: a request that provably never left for a dead
// sandbox runs once in a fresh context, whose result says StateLost.
func TestNotSentIsToldLost(t *testing.T) {
	m, lp := newLiveEnv(t, contexts.Config{HealthCheckInterval: time.Hour})
	old := liveExec(t, m, "x = 1")
	lp.Kill(old.SandboxID)
	lp.conn(old.SandboxID).notSent.Store(true)
	res := liveExec(t, m, "print('fresh')")
	if !res.StateLost || res.ContextID == old.ContextID || res.Stdout != "fresh\n" {
		t.Fatalf("after a request that was never sent: %+v", res)
	}
}

// TestUseToldLostOnce: a Use callback asks StateLost; a callback that does
// not ask leaves it for the next call, which is told.
func TestUseToldLostOnce(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	old := e.exec(id, "x = 1")
	e.p.Kill(old.SandboxID)
	use := func(ask bool) (bool, string) {
		var lost bool
		var sid string
		err := e.m.Use(e.ctx, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
			sid = sb.ID()
			if ask {
				lost = contexts.StateLost(ctx)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return lost, sid
	}
	if _, sid := use(false); sid == old.SandboxID {
		t.Fatal("Use reached the dead sandbox")
	}
	if lost, _ := use(true); !lost {
		t.Fatal("the first callback to ask was not told the loss a callback that did not ask left")
	}
	if lost, _ := use(true); lost {
		t.Fatal("a loss was told twice")
	}
	if contexts.StateLost(e.ctx) {
		t.Fatal("StateLost outside a Use callback")
	}
}

// TestUseDiedUnderTheCall: a callback whose sandbox dies under it fails
// with unavailable; Use pings, finds it dead, ends the context and answers
// a FailureLost with StateLost. A callback failing with unavailable on a
// sandbox that still answers keeps the context and its error as is.
func TestUseDiedUnderTheCall(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	cause := fmt.Errorf("exec: connection reset: %w", errdefs.ErrUnavailable)
	err := e.m.Use(e.ctx, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		return cause
	})
	if _, ok := contexts.AsFailure(err); ok || !errors.Is(err, cause) {
		t.Fatalf("a failure on a live sandbox became %v", err)
	}
	err = e.m.Use(e.ctx, id, contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		e.p.Kill(sb.ID())
		return cause
	})
	f, ok := contexts.AsFailure(err)
	if !ok || f.Kind != contexts.FailureLost || !f.StateLost || !errors.Is(err, cause) {
		t.Fatalf("Use on a sandbox that died under it = %v", err)
	}
	if r := e.record(first.ContextID); r.State != contexts.StateError {
		t.Fatalf("the dead sandbox's context: %+v", r)
	}
	if res := e.exec(id, "1"); res.StateLost || res.ContextID == first.ContextID {
		t.Fatalf("the call after: %+v, want a fresh context, the loss already told", res)
	}
}

// TestLostAtReconcileIsTold: a sandbox gone while the daemon was down is
// found at Start; the identity's next call says StateLost.
func TestLostAtReconcileIsTold(t *testing.T) {
	e1 := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	old := e1.exec(id, "x = 1")
	e1.p.Vanish(old.SandboxID) // the daemon crashed; its sandbox went too
	e2 := e1.second(contexts.Config{})
	if res := e2.exec(id, "1"); !res.StateLost || res.ContextID == old.ContextID {
		t.Fatalf("first call after the restart: %+v, want StateLost", res)
	}
	// The other identities are not told anything.
	if res := e2.exec(ident("t1", "c2", "main"), "1"); res.StateLost {
		t.Fatalf("a new conversation was told a loss: %+v", res)
	}
}
