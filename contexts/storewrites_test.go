package contexts_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/store/memory"
)

// countingStore counts the writes a reused context costs.
type countingStore struct {
	contexts.Store
	touches, records atomic.Int64
}

func (s *countingStore) Touch(ctx context.Context, id string, now, exp time.Time) error {
	s.touches.Add(1)
	return s.Store.Touch(ctx, id, now, exp)
}

func (s *countingStore) RecordExecution(ctx context.Context, id string, n int, dur time.Duration, now, exp time.Time) (*contexts.Record, error) {
	s.records.Add(1)
	return s.Store.RecordExecution(ctx, id, n, dur, now, exp)
}

func newCountingEnv(t *testing.T, cfg contexts.Config) (*env, *countingStore) {
	cs := &countingStore{Store: memory.New()}
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: cs, clock: newClock()}
	return e.start(cfg), cs
}

// TestExecuteWritesOnce: a reused Execute writes the store once
// (RecordExecution, which also extends expiresAt); GetOrCreate still
// touches.
func TestExecuteWritesOnce(t *testing.T) {
	e, cs := newCountingEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	contexts.Settle(e.m) // the first call's write is not counted below
	cs.touches.Store(0)
	cs.records.Store(0)
	e.clock.Advance(time.Minute)
	res := e.exec(id, "print(x)")
	if res.ContextID != first.ContextID || res.Stdout != "1\n" {
		t.Fatalf("reuse: %+v", res)
	}
	contexts.Settle(e.m) // the count is written behind the answer
	if tc, rc := cs.touches.Load(), cs.records.Load(); tc != 0 || rc != 1 {
		t.Fatalf("Execute on reuse: %d touches, %d RecordExecution; want 0 and 1", tc, rc)
	}
	rec := e.record(first.ContextID)
	if !rec.LastUsedAt.Equal(e.clock.Now()) || !rec.ExpiresAt.Equal(e.clock.Now().Add(contexts.DefaultTTL)) {
		t.Fatalf("record after reuse: lastUsedAt %v expiresAt %v (now %v)", rec.LastUsedAt, rec.ExpiresAt, e.clock.Now())
	}
	e.getOrCreate(id)
	if tc := cs.touches.Load(); tc != 1 {
		t.Fatalf("GetOrCreate on reuse: %d touches, want 1", tc)
	}
}

// TestExecuteNearExpiryTouchesFirst: when the context could expire before
// the call ends (TTL shorter than the call's timeout and grace), Execute
// extends it before running, as before, so no process expires it mid-call.
func TestExecuteNearExpiryTouchesFirst(t *testing.T) {
	e, cs := newCountingEnv(t, contexts.Config{TTL: 30 * time.Second})
	id := ident("t1", "c1", "main")
	e.exec(id, "x = 1")
	cs.touches.Store(0)
	e.clock.Advance(10 * time.Second)
	e.exec(id, "print(x)")
	if tc := cs.touches.Load(); tc != 1 {
		t.Fatalf("Execute near expiry: %d touches, want 1", tc)
	}
}

// TestExecuteEndedElsewhere: a record another process ended (its sandbox
// not yet torn down) is noticed by RecordExecution's answer; the manager
// drops it and the next call runs in a fresh context.
func TestExecuteEndedElsewhere(t *testing.T) {
	e, _ := newCountingEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	contexts.Settle(e.m)
	ok, err := e.store.Terminate(e.ctx, first.ContextID, contexts.ReasonManual, e.clock.Now(), "")
	if err != nil || !ok {
		t.Fatalf("terminate elsewhere: %v %v", ok, err)
	}
	e.exec(id, "1")      // raced the termination: runs, and the manager notices
	contexts.Settle(e.m) // when its count's write is refused
	if st := e.m.Stats(); st.Active != 0 {
		t.Fatalf("ended record still served: %+v", st)
	}
	res := e.exec(id, "print('fresh')")
	if res.ContextID == first.ContextID || res.SandboxID == first.SandboxID {
		t.Fatalf("after the record ended elsewhere: %+v", res)
	}
	if rec := e.record(first.ContextID); rec.State != contexts.StateTerminated || rec.ExecutionCount != 1 {
		t.Fatalf("ended record: %+v", rec)
	}
}

// TestExecuteSandboxDestroyedElsewhere: when the process that ended the
// record also tore the sandbox down, the health check catches it before
// the call and the call runs in a fresh context, transparently.
func TestExecuteSandboxDestroyedElsewhere(t *testing.T) {
	e, _ := newCountingEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	first := e.exec(id, "x = 1")
	contexts.Settle(e.m)
	if ok, err := e.store.Terminate(e.ctx, first.ContextID, contexts.ReasonManual, e.clock.Now(), ""); err != nil || !ok {
		t.Fatalf("terminate elsewhere: %v %v", ok, err)
	}
	e.p.Kill(first.SandboxID)
	res := e.exec(id, "print('fresh')")
	if res.ContextID == first.ContextID || res.Stdout != "fresh\n" {
		t.Fatalf("after the sandbox was destroyed elsewhere: %+v", res)
	}
}
