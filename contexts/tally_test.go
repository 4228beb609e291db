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

// gatedStore holds every RecordExecution until its gate opens, and
// counts them: a store slow to write an execution's accounting.
type gatedStore struct {
	contexts.Store
	gate    chan struct{}
	writes  atomic.Int64
	entered chan struct{} // one value per write that reached the gate
}

func (s *gatedStore) RecordExecution(ctx context.Context, id string, n int, dur time.Duration, now, exp time.Time) (*contexts.Record, error) {
	s.writes.Add(1)
	s.entered <- struct{}{}
	<-s.gate
	return s.Store.RecordExecution(ctx, id, n, dur, now, exp)
}

func newGatedEnv(t *testing.T, cfg contexts.Config) (*env, *gatedStore) {
	return newGatedEnvOn(t, contextstest.NewProvider(), cfg)
}

func newGatedEnvOn(t *testing.T, p *contextstest.Provider, cfg contexts.Config) (*env, *gatedStore) {
	gs := &gatedStore{Store: memory.New(), gate: make(chan struct{}), entered: make(chan struct{}, 64)}
	e := (&env{t: t, ctx: context.Background(), p: p, store: gs, clock: newClock()}).start(cfg)
	t.Cleanup(func() { // before the manager's Close, which waits for the writes
		select {
		case <-gs.gate:
		default:
			close(gs.gate)
		}
	})
	return e, gs
}

// within runs f and fails the test when it has not returned in 30 s.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return in 30 s", what)
	}
}

// TestExecutionWrittenBehindItsAnswer: a call is answered without waiting
// for the store to take its accounting; calls answered while a write is
// under way go to the store together in the next write; a read through
// the manager waits for them and sees every call.
func TestExecutionWrittenBehindItsAnswer(t *testing.T) {
	e, gs := newGatedEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	var first *contexts.ExecuteResult
	within(t, "an Execute whose store write is held", func() { first = e.exec(id, "x = 1") })
	within(t, "the store write", func() { <-gs.entered }) // under way, held at the gate
	for i := range 5 {
		var res *contexts.ExecuteResult
		within(t, "an Execute while a write is held", func() { res = e.exec(id, "x = 1") })
		if res.ContextID != first.ContextID || res.ExecutionCount != i+2 {
			t.Fatalf("call %d while the write is held: %+v", i+2, res)
		}
	}
	got := make(chan *contexts.Record, 1)
	go func() {
		rec, err := e.m.Get(e.ctx, "t1", first.ContextID)
		if err != nil {
			t.Error(err)
		}
		got <- rec
	}()
	close(gs.gate)
	var rec *contexts.Record
	within(t, "Get", func() { rec = <-got })
	if rec == nil || rec.ExecutionCount != 6 {
		t.Fatalf("record read after six calls: %+v", rec)
	}
	if n := gs.writes.Load(); n != 2 {
		t.Fatalf("%d store writes for six calls, want 2 (one held, then the five answered meanwhile)", n)
	}
}

// settling runs f, which must wait for the held write, and opens the
// gate after a while: f returning before that is a failure only when f
// then misses the write (each test checks what f left in the store).
func settling(t *testing.T, gs *gatedStore, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(200 * time.Millisecond):
	}
	close(gs.gate)
	within(t, what, func() { <-done })
}

// TestTallyLandsBeforeALaterUse: a use that extends the expiry while a
// call's write (with the older expiry) is held leaves its own expiry in
// the store: the held write lands first.
func TestTallyLandsBeforeALaterUse(t *testing.T) {
	e, gs := newGatedEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	res := e.exec(id, "x = 1")
	within(t, "the store write", func() { <-gs.entered })
	e.clock.Advance(time.Minute)
	settling(t, gs, "GetOrCreate", func() { e.getOrCreate(id) })
	want := e.clock.Now().Add(contexts.DefaultTTL)
	if stored := e.record(res.ContextID); !stored.ExpiresAt.Equal(want) || stored.ExecutionCount != 1 {
		t.Fatalf("stored expiresAt %v, count %d; want the later use's %v and 1", stored.ExpiresAt, stored.ExecutionCount, want)
	}
}

// TestTallyLandsBeforeTheEnd: a context rotated (ended by the manager)
// while its calls' write is held ends with every call counted.
func TestTallyLandsBeforeTheEnd(t *testing.T) {
	e, gs := newGatedEnv(t, contexts.Config{MaxExecutionsPerContext: 2})
	id := ident("t1", "c1", "main")
	res := e.exec(id, "x = 1")
	within(t, "the store write", func() { <-gs.entered })
	var last *contexts.ExecuteResult
	settling(t, gs, "the rotating call", func() { last = e.exec(id, "x = 2") })
	if !last.Rotated {
		t.Fatalf("second call of two: %+v, want rotated", last)
	}
	if rec := e.record(res.ContextID); rec.State != contexts.StateTerminated || rec.ExecutionCount != 2 {
		t.Fatalf("rotated record: state %s, count %d; want terminated and 2", rec.State, rec.ExecutionCount)
	}
}

// TestCloseWritesTheTally: a manager closed while a write is held
// finishes it and the calls answered after it: the store has them all.
func TestCloseWritesTheTally(t *testing.T) {
	e, gs := newGatedEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	res := e.exec(id, "x = 1")
	within(t, "the store write", func() { <-gs.entered })
	e.exec(id, "x = 2")
	settling(t, gs, "Close", func() {
		if err := e.m.Close(e.ctx); err != nil {
			t.Error(err)
		}
	})
	rec, err := e.store.Get(e.ctx, res.ContextID)
	if err != nil || rec.ExecutionCount != 2 {
		t.Fatalf("record after Close: %+v, %v; want 2 executions", rec, err)
	}
}

// TestSharedNodesWriteBeforeAnswering: with a shared provider every node
// serves the context and reads its record before a call, so a call is
// answered only once the store has it: the next call, on any node, sees
// it counted.
func TestSharedNodesWriteBeforeAnswering(t *testing.T) {
	p := contextstest.NewProvider()
	p.Shared = true
	e, gs := newGatedEnvOn(t, p, contexts.Config{Node: "node-a"})
	id := ident("t1", "c1", "main")
	done := make(chan *contexts.ExecuteResult, 1)
	go func() { done <- e.exec(id, "x = 1") }()
	within(t, "the store write", func() { <-gs.entered }) // held at the gate
	select {
	case res := <-done: // answered while the store cannot have the call
		rec, err := e.store.Get(e.ctx, res.ContextID)
		t.Fatalf("answered before the store took the call: %+v (stored %+v, %v)", res, rec, err)
	case <-time.After(200 * time.Millisecond):
	}
	close(gs.gate)
	var res *contexts.ExecuteResult
	within(t, "the shared call", func() { res = <-done })
	if rec, err := e.store.Get(e.ctx, res.ContextID); err != nil || rec.ExecutionCount != 1 {
		t.Fatalf("record right after the answer: %+v, %v; want 1 execution", rec, err)
	}
}

// TestCallsOfAWhileShareAWrite: a call's store write waits tallyDelay, and
// the calls answered in it go to the store in that one write; Settle
// starts a waiting write at once. Before the delay every call started a
// writer of its own (a goroutine, which woke an idle thread during the
// call) and a fast store took one write per call.
func TestCallsOfAWhileShareAWrite(t *testing.T) {
	e, cs := newCountingEnv(t, contexts.Config{})
	contexts.SetTallyDelay(e.m, time.Hour) // only Settle writes
	id := ident("t1", "c1", "main")
	var res *contexts.ExecuteResult
	for range 10 {
		res = e.exec(id, "x = 1")
		// Time for a writer started by the call to write: the calls
		// share a write only by the delay.
		time.Sleep(5 * time.Millisecond)
	}
	within(t, "Settle", func() { contexts.Settle(e.m) })
	if n := cs.records.Load(); n != 1 {
		t.Fatalf("%d store writes for ten calls within the delay, want 1", n)
	}
	if rec := e.record(res.ContextID); rec.ExecutionCount != 10 {
		t.Fatalf("record after Settle: %d executions, want 10", rec.ExecutionCount)
	}
}

// TestDueWriteLandsUnasked: with nothing reading the record, a call's
// write lands once its delay is over; so does the next call's, whose
// writer waits on the same timer, set again.
func TestDueWriteLandsUnasked(t *testing.T) {
	e, _ := newCountingEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	for n := int64(1); n <= 2; n++ {
		res := e.exec(id, "x = 1")
		deadline := time.Now().Add(30 * time.Second)
		for {
			rec, err := e.store.Get(e.ctx, res.ContextID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.ExecutionCount == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("call %d: the store reads %d executions after 30 s, want %d", n, rec.ExecutionCount, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestCloseStartsADueWrite: Close does not wait out a write's delay: it
// starts the waiting writes, and the store has every call.
func TestCloseStartsADueWrite(t *testing.T) {
	e, _ := newCountingEnv(t, contexts.Config{})
	contexts.SetTallyDelay(e.m, time.Hour)
	id := ident("t1", "c1", "main")
	res := e.exec(id, "x = 1")
	e.exec(id, "x = 2")
	within(t, "Close", func() {
		if err := e.m.Close(e.ctx); err != nil {
			t.Error(err)
		}
	})
	rec, err := e.store.Get(e.ctx, res.ContextID)
	if err != nil || rec.ExecutionCount != 2 {
		t.Fatalf("record after Close: %+v, %v; want 2 executions", rec, err)
	}
}
