package contexts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// fixed creates id's context with a fixed expiry an hour away, as the E2B
// API does.
func (e *env) fixed(id contexts.Identity) *contexts.Record {
	e.t.Helper()
	rec, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{TTL: time.Hour, FixedExpiry: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// use runs Use on id's context (contextID) with fn and returns its error.
func (e *env) use(id contexts.Identity, contextID string, fn func(sb contexts.Sandbox) error) error {
	return e.m.Use(e.ctx, id, contexts.CreateOptions{ContextID: contextID}, func(_ context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		return fn(sb)
	})
}

// TestUseOfAFixedExpiryWrittenAfterItsCall: a Use of a context whose
// expiry is fixed (E2B's: the touch moves lastUsedAt only) does not wait
// for the store: its touch is in the manager's record at once and goes to
// the store after the call, through the context's writer.
func TestUseOfAFixedExpiryWrittenAfterItsCall(t *testing.T) {
	e, gs := newGatedEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := e.fixed(id)
	e.clock.Advance(time.Minute)
	used := e.clock.Now()
	err := e.use(id, rec.ID, func(contexts.Sandbox) error {
		select { // nothing is written while the call runs
		case <-gs.entered:
			t.Error("the use was written while its call ran")
		case <-time.After(100 * time.Millisecond):
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the use written after its call", func() { <-gs.entered }) // held at the gate
	if stored, err := e.store.Get(e.ctx, rec.ID); err != nil || stored.LastUsedAt.Equal(used) {
		t.Fatalf("stored while the write is held: %+v, %v; want the use before it", stored, err)
	}
	var got *contexts.Record
	settling(t, gs, "Get", func() {
		var err error
		if got, err = e.m.Get(e.ctx, "t1", rec.ID); err != nil {
			t.Error(err)
		}
	})
	if got == nil || !got.LastUsedAt.Equal(used) || !got.ExpiresAt.Equal(rec.ExpiresAt) {
		t.Fatalf("Get after the use: %+v; want lastUsedAt %v and the fixed expiresAt %v", got, used, rec.ExpiresAt)
	}
	if n := gs.writes.Load(); n != 1 {
		t.Fatalf("%d writes for one use, want 1", n)
	}
}

// TestUseOfASlidingTTLTouchesFirst: a context whose TTL slides with use is
// touched before the call, as before: its new expiry is in the store while
// the call runs (a call longer than what is left of the TTL is not expired
// by another process's sweep).
func TestUseOfASlidingTTLTouchesFirst(t *testing.T) {
	e, cs := newCountingEnv(t, contexts.Config{TTL: 30 * time.Second})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	e.clock.Advance(10 * time.Second)
	want := e.clock.Now().Add(30 * time.Second)
	err := e.use(id, rec.ID, func(contexts.Sandbox) error {
		if stored, err := cs.Store.Get(e.ctx, rec.ID); err != nil || !stored.ExpiresAt.Equal(want) {
			t.Errorf("stored as the call runs: %+v, %v; want expiresAt %v", stored, err, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	contexts.Settle(e.m)
	if tc, rc := cs.touches.Load(), cs.records.Load(); tc != 1 || rc != 0 {
		t.Fatalf("Use of a sliding TTL: %d touches, %d behind; want 1 and 0", tc, rc)
	}
}

// TestUseOfAContextEndedElsewhere: a fixed-expiry context another process
// ended in the store, whose sandbox still answers, serves the call that
// reaches it whole (its write comes after the call, so the refusal does
// not cut the call off); the refusal drops it, and the next call finds it
// gone.
func TestUseOfAContextEndedElsewhere(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := e.fixed(id)
	if _, err := e.store.Terminate(e.ctx, rec.ID, contexts.ReasonManual, e.clock.Now(), ""); err != nil {
		t.Fatal(err)
	}
	err := e.use(id, rec.ID, func(sb contexts.Sandbox) error {
		time.Sleep(50 * time.Millisecond) // a write under the call would land now
		return sb.Ping(e.ctx)
	})
	if err != nil {
		t.Fatalf("the call that reached the context: %v", err)
	}
	contexts.Settle(e.m) // its write, refused
	err = e.use(id, rec.ID, func(contexts.Sandbox) error {
		t.Error("a call ran on a context whose end the manager had read")
		return nil
	})
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Use after the refused write: %v, want not_found", err)
	}
}

// TestExecuteOfAFixedExpiryWritesOnce: an Execute with no timeout (its
// use is recorded after the call) of a fixed-expiry context writes once,
// its RecordExecution, which carries the use.
func TestExecuteOfAFixedExpiryWritesOnce(t *testing.T) {
	e, cs := newCountingEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := e.fixed(id)
	contexts.Settle(e.m)
	cs.touches.Store(0)
	cs.records.Store(0)
	e.clock.Advance(time.Minute)
	if _, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1", Unbounded: true}, nil); err != nil {
		t.Fatal(err)
	}
	contexts.Settle(e.m)
	if tc, rc := cs.touches.Load(), cs.records.Load(); tc != 0 || rc != 1 {
		t.Fatalf("Execute of a fixed expiry: %d touches, %d RecordExecution; want 0 and 1", tc, rc)
	}
	if stored := e.record(rec.ID); !stored.LastUsedAt.Equal(e.clock.Now()) || stored.ExecutionCount != 1 {
		t.Fatalf("stored: lastUsedAt %v, count %d", stored.LastUsedAt, stored.ExecutionCount)
	}
}
