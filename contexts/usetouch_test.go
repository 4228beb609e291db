package contexts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// use runs Use on id's context (contextID) with fn, failing the test on an
// error.
func (e *env) use(id contexts.Identity, contextID string, fn func(rec *contexts.Record)) {
	e.t.Helper()
	err := e.m.Use(e.ctx, id, contexts.CreateOptions{ContextID: contextID}, func(_ context.Context, rec *contexts.Record, _ contexts.Sandbox) error {
		fn(rec)
		return nil
	})
	if err != nil {
		e.t.Fatalf("Use(%v): %v", id, err)
	}
}

// TestUseTouchWrittenBehindItsAnswer: a Use (the E2B API's every call) is
// answered without waiting for the store to take its touch; the manager's
// reads see the touch at once, and the store gets it right after.
func TestUseTouchWrittenBehindItsAnswer(t *testing.T) {
	e, gs := newGatedEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id) // created: no write behind it
	e.clock.Advance(time.Minute)
	used := e.clock.Now()
	within(t, "a Use whose touch is held", func() { e.use(id, rec.ID, func(*contexts.Record) {}) })
	testenv.WaitFor(t, "the touch written behind the answer", 5*time.Second, func() bool { return gs.writes.Load() == 1 })
	<-gs.entered // held at the gate
	if stored, err := e.store.Get(e.ctx, rec.ID); err != nil || stored.LastUsedAt.Equal(used) {
		t.Fatalf("stored while the touch is held: %+v, %v; want the use before it", stored, err)
	}
	var got *contexts.Record
	settling(t, gs, "Get", func() {
		var err error
		if got, err = e.m.Get(e.ctx, "t1", rec.ID); err != nil {
			t.Error(err)
		}
	})
	want := used.Add(contexts.DefaultTTL)
	if got == nil || !got.LastUsedAt.Equal(used) || !got.ExpiresAt.Equal(want) {
		t.Fatalf("Get after the use: %+v; want lastUsedAt %v, expiresAt %v", got, used, want)
	}
	if stored := e.record(rec.ID); !stored.LastUsedAt.Equal(used) || !stored.ExpiresAt.Equal(want) || stored.ExecutionCount != 0 {
		t.Fatalf("stored after the write: lastUsedAt %v, expiresAt %v, count %d", stored.LastUsedAt, stored.ExpiresAt, stored.ExecutionCount)
	}
}

// TestUseNearItsExpiryTouchesFirst: a context that could expire before a
// write behind the answer lands is touched before the call, as before.
func TestUseNearItsExpiryTouchesFirst(t *testing.T) {
	e, cs := newCountingEnv(t, contexts.Config{TTL: 30 * time.Second})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	e.clock.Advance(29 * time.Second) // a second left
	want := e.clock.Now().Add(30 * time.Second)
	e.use(id, rec.ID, func(*contexts.Record) {
		if stored, err := cs.Store.Get(e.ctx, rec.ID); err != nil || !stored.ExpiresAt.Equal(want) {
			t.Errorf("stored as the call runs: %+v, %v; want expiresAt %v", stored, err, want)
		}
	})
	if tc, rc := cs.touches.Load(), cs.records.Load(); tc != 1 || rc != 0 {
		t.Fatalf("Use near its expiry: %d touches, %d behind; want 1 and 0", tc, rc)
	}
}

// TestUseOnAContextEndedElsewhere: a context another process ended in the
// store is answered once more (its touch goes behind the answer), and its
// write's refusal drops it: the next call finds it gone.
func TestUseOnAContextEndedElsewhere(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	if _, err := e.store.Terminate(e.ctx, rec.ID, contexts.ReasonManual, e.clock.Now(), ""); err != nil {
		t.Fatal(err)
	}
	e.use(id, rec.ID, func(*contexts.Record) {})
	contexts.Settle(e.m) // its write, refused
	err := e.m.Use(e.ctx, id, contexts.CreateOptions{ContextID: rec.ID}, func(context.Context, *contexts.Record, contexts.Sandbox) error {
		t.Error("a call ran on a context whose end the manager had read")
		return nil
	})
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Use after the refused write: %v, want not_found", err)
	}
}
