package contexts_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestPauseTyped: a pause is the record's typed PausedAt, set by the
// manager's clock (not the wall clock: the test clock is years away), kept
// in the store across a restart, and cleared by Resume; the caller's
// metadata never holds it.
func TestPauseTyped(t *testing.T) {
	e := newEnv(t, contexts.Config{TTL: 10 * time.Minute})
	id := ident("t1", "c1", "main")
	rec, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{Metadata: map[string]string{"user": "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	paused, err := e.m.Pause(e.ctx, "t1", rec.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	for what, r := range map[string]*contexts.Record{"Pause's answer": paused, "stored": e.record(rec.ID)} {
		if r.PausedAt == nil || !r.PausedAt.Equal(now) || !r.ExpiresAt.Equal(now.Add(time.Hour)) || len(r.Metadata) != 1 || r.Metadata["user"] != "alice" {
			t.Fatalf("%s record: pausedAt %v, expiresAt %v, metadata %v; want paused at %v until an hour later, the caller's metadata only",
				what, r.PausedAt, r.ExpiresAt, r.Metadata, now)
		}
	}
	if !e.p.Paused(rec.SandboxID) {
		t.Fatal("the provider's sandbox is not paused")
	}
	if _, err := e.m.Execute(e.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "1"}, nil); !errors.Is(err, contexts.ErrPaused) {
		t.Fatalf("execute while paused: %v, want ErrPaused", err)
	}

	e2 := e.second(contexts.Config{TTL: 10 * time.Minute})
	if _, err := e2.m.GetOrCreate(e2.ctx, id, contexts.CreateOptions{}); !errors.Is(err, contexts.ErrPaused) {
		t.Fatalf("use after a restart: %v, want ErrPaused", err)
	}
	resumed, err := e2.m.Resume(e2.ctx, "t1", rec.ID, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Paused() || e2.record(rec.ID).Paused() || e.p.Paused(rec.SandboxID) {
		t.Fatalf("after resume: record %+v, stored paused %v, sandbox paused %v", resumed.Lifecycle, e2.record(rec.ID).Paused(), e.p.Paused(rec.SandboxID))
	}
	e2.exec(id, "x = 1")
}

// TestAutoPauseByManagerClock: a context created with AutoPause is
// paused, not ended, once its expiry passes by the manager's clock; the
// wall clock plays no part.
func TestAutoPauseByManagerClock(t *testing.T) {
	e := newEnv(t, contexts.Config{TTL: 10 * time.Minute})
	auto, plain := ident("t1", "auto", "main"), ident("t1", "plain", "main")
	a, err := e.m.GetOrCreate(e.ctx, auto, contexts.CreateOptions{FixedExpiry: true, AutoPause: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := e.getOrCreate(plain)
	if got, err := e.m.AutoPause(e.ctx, "t1", a.ID); err != nil || got.Paused() {
		t.Fatalf("AutoPause before its expiry: %+v, %v; want running", got, err)
	}
	e.clock.Advance(11 * time.Minute)
	if !e.m.Now().Equal(e.clock.Now()) {
		t.Fatalf("Manager.Now = %v, want the test clock's %v", e.m.Now(), e.clock.Now())
	}
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	got := e.record(a.ID)
	if got.State != contexts.StateReady || got.PausedAt == nil || !got.PausedAt.Equal(e.clock.Now()) || !got.ExpiresAt.Equal(e.clock.Now().Add(time.Hour)) {
		t.Fatalf("auto-pause context after its expiry: %+v; want paused now, for an hour", got)
	}
	if got := e.record(p.ID); got.State != contexts.StateTerminated || got.Reason != contexts.ReasonExpired {
		t.Fatalf("plain context after its expiry: %s/%s, want expired", got.State, got.Reason)
	}
}

// TestPauseNotSupported: on a provider without pause, Pause says so up
// front naming the provider (failed_precondition), and a create asking
// to pause at its expiry is refused before anything is made.
func TestPauseNotSupported(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	e.p.Without = contexts.CapPause
	id := ident("t1", "c1", "main")
	rec := e.getOrCreate(id)
	_, err := e.m.Pause(e.ctx, "t1", rec.ID, time.Hour)
	if !errors.Is(err, contexts.ErrNotSupported) || !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "pause is not supported by provider fake") {
		t.Fatalf("pause on a provider without it: %v", err)
	}
	created := e.p.Created()
	_, err = e.m.GetOrCreate(e.ctx, ident("t1", "c2", "main"), contexts.CreateOptions{AutoPause: time.Hour})
	if !errors.Is(err, contexts.ErrNotSupported) || !strings.Contains(err.Error(), "provider fake") {
		t.Fatalf("create with AutoPause on a provider without pause: %v", err)
	}
	if e.p.Created() != created {
		t.Fatal("a refused create made a sandbox")
	}
}

// TestReservedMetadataRefused: a caller's metadata key under
// "sandlot." is invalid_argument naming the key, whether the call would
// create the context or reuse it; nothing is created.
func TestReservedMetadataRefused(t *testing.T) {
	e := newEnv(t, contexts.Config{})
	existing := ident("t1", "c1", "main")
	e.getOrCreate(existing)
	created := e.p.Created()
	for _, id := range []contexts.Identity{existing, ident("t1", "new", "main")} {
		_, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{Metadata: map[string]string{"user": "a", "sandlot.paused": "2026-01-01T00:00:00Z"}})
		wantCategory(t, err, errdefs.ErrInvalidArgument)
		if !strings.Contains(err.Error(), `"sandlot.paused"`) {
			t.Fatalf("error does not name the key: %v", err)
		}
	}
	if e.p.Created() != created {
		t.Fatal("a refused create made a sandbox")
	}
	if _, err := e.m.GetOrCreate(e.ctx, ident("t1", "ok", "main"), contexts.CreateOptions{Metadata: map[string]string{"sandlotDeployment": "d"}}); err != nil {
		t.Fatalf("a key that only starts like sandlot: %v", err)
	}
}
