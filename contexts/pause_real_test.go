package contexts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestRealPauseResume pauses a context on the real provider: its calls are
// refused (never health-checked, which a frozen agent could not answer,
// so never replaced), it outlives its TTL and the cleanup pass, a daemon
// restart keeps it paused, and Resume brings back the same sandbox with its
// python variable. Terminating a paused context removes its sandbox.
func TestRealPauseResume(t *testing.T) {
	e := newRealEnv(t, contexts.Config{})
	a := ident("t1", "paused", "main")
	res := e.exec(a, "python", "x = 41")
	cid, sid := res.ContextID, res.SandboxID
	// A TTL the pause must outlive.
	if _, err := e.m.SetTTL(e.ctx, "t1", cid, time.Second); err != nil {
		t.Fatal(err)
	}

	if _, err := e.m.Resume(e.ctx, "t1", cid, time.Minute); !errors.Is(err, contexts.ErrNotPaused) {
		t.Fatalf("resume of a running context: %v, want ErrNotPaused", err)
	}
	rec, err := e.m.Pause(e.ctx, "t1", cid, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Paused() || rec.State != contexts.StateReady || time.Until(rec.ExpiresAt) < 50*time.Minute {
		t.Fatalf("paused record: %+v", rec)
	}
	if _, err := e.m.Pause(e.ctx, "t1", cid, time.Hour); !errors.Is(err, contexts.ErrPaused) {
		t.Fatalf("second pause: %v, want ErrPaused", err)
	}
	if _, err := e.m.Pause(e.ctx, "t2", cid, time.Hour); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's pause: %v, want not_found", err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	_, err = e.m.Execute(ctx, a, contexts.ExecuteRequest{Language: "python", Code: "x", Timeout: 5 * time.Second}, nil)
	cancel()
	if !errors.Is(err, contexts.ErrPaused) {
		t.Fatalf("execute on a paused context: %v, want ErrPaused", err)
	}

	// Past its TTL, through a cleanup pass: still there, still paused.
	time.Sleep(1500 * time.Millisecond)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.Get(e.ctx, "t1", cid); got == nil || got.State != contexts.StateReady || !e.running(sid) {
		t.Fatalf("after cleanup: %+v, running %v", got, e.running(sid))
	}

	// A daemon restart: the paused context is adopted, not lost.
	if err := e.m.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.p.Provider = e.provider()
	e.start(contexts.Config{})
	if got, _ := e.m.Get(e.ctx, "t1", cid); got == nil || got.State != contexts.StateReady {
		t.Fatalf("after restart: %+v", got)
	}
	if _, err := e.m.GetOrCreate(e.ctx, a, contexts.CreateOptions{}); !errors.Is(err, contexts.ErrPaused) {
		t.Fatalf("use after restart: %v, want ErrPaused", err)
	}
	if st := e.m.Stats(); st.HealthCheckFailures != 0 {
		t.Fatalf("health check failures %d: a paused sandbox must not be checked", st.HealthCheckFailures)
	}

	rec, err = e.m.Resume(e.ctx, "t1", cid, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Paused() || time.Until(rec.ExpiresAt) > time.Minute {
		t.Fatalf("resumed record: %+v", rec)
	}
	res = e.exec(a, "python", "x + 1")
	if res.ContextID != cid || res.SandboxID != sid || mainResult(res) != "42" {
		t.Fatalf("after resume: %+v (%q), want the same sandbox with x = 41", res, mainResult(res))
	}

	if _, err := e.m.Pause(e.ctx, "t1", cid, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Terminate(e.ctx, "t1", cid, contexts.ReasonManual); err != nil {
		t.Fatal(err)
	}
	if e.running(sid) {
		t.Fatal("a terminated paused context left its sandbox")
	}
}

// TestRealAutoPause: a context created to pause at its expiry
// (CreateOptions.AutoPause, E2B's autoPause) is paused by the cleanup pass, not
// ended, and resumes with its state; one without it ends as before.
func TestRealAutoPause(t *testing.T) {
	e := newRealEnv(t, contexts.Config{})
	auto, plain := ident("t1", "auto", "main"), ident("t1", "plain", "main")
	for _, id := range []contexts.Identity{auto, plain} {
		var keep time.Duration
		if id == auto {
			keep = time.Hour
		}
		if _, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{TTL: time.Minute, FixedExpiry: true, AutoPause: keep}); err != nil {
			t.Fatal(err)
		}
	}
	res := e.exec(auto, "python", "y = 'still'")
	pl := e.exec(plain, "python", "1")
	for _, id := range []string{res.ContextID, pl.ContextID} {
		if _, err := e.m.SetTTL(e.ctx, "t1", id, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := e.m.Cleanup(e.ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := e.m.Get(e.ctx, "t1", res.ContextID)
	if err != nil || !rec.Paused() || rec.State != contexts.StateReady {
		t.Fatalf("auto-pause context after its expiry: %+v, %v; want paused", rec, err)
	}
	if rec, _ := e.m.Get(e.ctx, "t1", pl.ContextID); rec.State != contexts.StateTerminated || rec.Reason != contexts.ReasonExpired {
		t.Fatalf("plain context after its expiry: %+v; want expired", rec)
	}
	if _, err := e.m.Resume(e.ctx, "t1", res.ContextID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := e.exec(auto, "python", "y"); got.SandboxID != res.SandboxID || mainResult(got) != "'still'" && mainResult(got) != "still" {
		t.Fatalf("after resume: %+v (%q)", got, mainResult(got))
	}
}
