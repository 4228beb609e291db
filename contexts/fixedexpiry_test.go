package contexts_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// TestFixedExpiry: a context created with FixedExpiry keeps its expiry
// through executions and other calls (E2B's absolute timeout); only SetTTL
// moves it, and it expires at that time however busy it was.
func TestFixedExpiry(t *testing.T) {
	e := newEnv(t, contexts.Config{TTL: 10 * time.Minute})
	id := ident("t1", "c1", "main")
	rec, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{FixedExpiry: true})
	if err != nil {
		t.Fatal(err)
	}
	end := rec.ExpiresAt
	e.clock.Advance(4 * time.Minute)
	e.exec(id, "x = 1")
	if _, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.record(rec.ID).ExpiresAt; !got.Equal(end) {
		t.Fatalf("expiresAt moved by calls: %v, want %v", got, end)
	}
	if _, err := e.m.SetTTL(e.ctx, "t1", rec.ID, 8*time.Minute); err != nil {
		t.Fatal(err)
	}
	end = e.clock.Now().Add(8 * time.Minute)
	e.clock.Advance(7 * time.Minute)
	e.exec(id, "x = 2")
	if got := e.record(rec.ID).ExpiresAt; !got.Equal(end) {
		t.Fatalf("expiresAt after SetTTL and a call: %v, want %v", got, end)
	}
	e.clock.Advance(2 * time.Minute)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.record(rec.ID); r.State != contexts.StateTerminated || r.Reason != contexts.ReasonExpired {
		t.Fatalf("busy fixed-expiry context not expired at its end: %+v", r)
	}
}

// TestFixedExpiryEndsBusyContext: a call in flight (a command without a
// timeout) does not keep a fixed-expiry context past its end; cleanup ends
// it, as E2B kills a sandbox at its timeout.
func TestFixedExpiryEndsBusyContext(t *testing.T) {
	e := newEnv(t, contexts.Config{TTL: 10 * time.Minute})
	id := ident("t1", "c1", "main")
	rec, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{FixedExpiry: true})
	if err != nil {
		t.Fatal(err)
	}
	inUse, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.m.Use(e.ctx, id, contexts.CreateOptions{ContextID: rec.ID}, func(ctx context.Context, _ *contexts.Record, _ contexts.Sandbox) error {
			close(inUse)
			<-release
			return nil
		})
	}()
	<-inUse
	e.clock.Advance(11 * time.Minute)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done
	if r := e.record(rec.ID); r.State != contexts.StateTerminated || r.Reason != contexts.ReasonExpired {
		t.Fatalf("busy fixed-expiry context past its end: %+v", r)
	}
}
