package contexts_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// errLayerTooBig is a capture's refusal of a layer over the snapshot
// limit: raised before anything touched the sandbox.
var errLayerTooBig = fmt.Errorf("layer over 1 GiB: %w", errdefs.ErrResourceExhausted)

// memoryEnv is an env whose provider keeps memory (its checkpoints fail:
// memoryFake) and pauses, whose every capture fails with captureErr
// (nil: none does), logging to logs.
func memoryEnv(t *testing.T, cfg contexts.Config, captureErr error) (*env, func() string) {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
	var mu sync.Mutex
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	cfg.Clock, cfg.PoolSize, cfg.CleanupInterval, cfg.Catalog = e.clock.Now, -1, time.Hour, &keeper{}
	e.m = contexts.NewManager(e.store, memoryFake{Provider: e.p, captureErr: captureErr}, cfg)
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	m := e.m
	t.Cleanup(func() { m.Close(context.Background()) })
	return e, func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
}

// TestPauseMemoryCaptureFails: a pause with memory whose capture fails
// before the checkpoint touched the sandbox (a layer over the limit:
// resource_exhausted) freezes the sandbox, as it did before pauses
// checkpointed, and says so at warn: E2B's pause() succeeds, and the
// pause at an autoPause sandbox's expiry (by the cleanup loop or by
// AutoPause, with memory or to disk) leaves it paused and active, never
// ended. Resume thaws it and a call runs. Before the fallback took any
// error of the capture, the pause failed and the expiry ended the
// context.
func TestPauseMemoryCaptureFails(t *testing.T) {
	cleanup := func(e *env, rec *contexts.Record) error {
		e.clock.Advance(11 * time.Minute)
		_, err := e.m.Cleanup(e.ctx)
		return err
	}
	for _, tc := range []struct {
		name   string
		toDisk bool // AutoPauseToDisk
		pause  func(e *env, rec *contexts.Record) error
	}{
		{"pause", false, func(e *env, rec *contexts.Record) error {
			_, err := e.m.PauseMemory(e.ctx, "t1", rec.ID, time.Hour)
			return err
		}},
		{"expiry by the cleanup loop", false, cleanup},
		{"expiry by AutoPause", false, func(e *env, rec *contexts.Record) error {
			e.clock.Advance(11 * time.Minute)
			_, err := e.m.AutoPause(e.ctx, "t1", rec.ID)
			return err
		}},
		{"expiry to disk", true, cleanup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, logs := memoryEnv(t, contexts.Config{TTL: 10 * time.Minute}, errLayerTooBig)
			id := ident("t1", "c", "main")
			rec, err := e.m.GetOrCreate(e.ctx, id, contexts.CreateOptions{FixedExpiry: true, AutoPause: time.Hour, AutoPauseToDisk: tc.toDisk})
			if err != nil {
				t.Fatal(err)
			}
			e.exec(id, "x = 41")
			if err := tc.pause(e, rec); err != nil {
				t.Fatalf("pause: %v, want the freezer", err)
			}
			got := e.record(rec.ID)
			if got.State != contexts.StateReady || !got.Paused() || got.Suspended() || got.SandboxID != rec.SandboxID {
				t.Fatalf("record after the pause: %+v; want ready, paused (frozen) on its sandbox", got)
			}
			if !e.p.Paused(rec.SandboxID) {
				t.Fatalf("sandbox %s is not frozen", rec.SandboxID)
			}
			if out := logs(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "frozen") || !strings.Contains(out, "resource exhausted") {
				t.Fatalf("logs: %s\nwant a warning of the fallback to the freezer naming the capture's error", out)
			}
			if _, err := e.m.Resume(e.ctx, "t1", rec.ID, time.Minute); err != nil {
				t.Fatalf("resume: %v", err)
			}
			if res := e.exec(id, "x + 1"); res.Woken || res.Restored {
				t.Fatalf("call after resume: %+v, want the same sandbox thawed", res)
			}
		})
	}
}

// TestSuspendCaptureFails: a suspend whose capture fails leaves the
// context running on its sandbox, whoever asked: /v1's suspend answers
// the capture's error, the idle suspend of the cleanup loop logs it and
// tries again at its next pass; neither ends the context.
func TestSuspendCaptureFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		idle    time.Duration
		suspend func(e *env, rec *contexts.Record) error
	}{
		{"suspend", 0, func(e *env, rec *contexts.Record) error {
			_, err := e.m.Suspend(e.ctx, "t1", rec.ID, 0)
			if !errors.Is(err, errdefs.ErrResourceExhausted) {
				return fmt.Errorf("suspend: %v, want the capture's resource_exhausted", err)
			}
			return nil
		}},
		{"idle suspend", time.Minute, func(e *env, rec *contexts.Record) error {
			e.clock.Advance(2 * time.Minute)
			_, err := e.m.Cleanup(e.ctx)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := memoryEnv(t, contexts.Config{TTL: 10 * time.Minute, IdleSuspend: tc.idle}, errLayerTooBig)
			id := ident("t1", "c", "main")
			rec := e.getOrCreate(id)
			e.exec(id, "x = 41")
			if err := tc.suspend(e, rec); err != nil {
				t.Fatal(err)
			}
			got := e.record(rec.ID)
			if got.State != contexts.StateReady || got.Paused() || got.SandboxID != rec.SandboxID || !e.running(rec.SandboxID) || e.p.Paused(rec.SandboxID) {
				t.Fatalf("record after the failed suspend: %+v; want ready and running on its sandbox", got)
			}
			if res := e.exec(id, "x + 1"); res.Woken || res.Restored {
				t.Fatalf("call after the failed suspend: %+v, want the same sandbox", res)
			}
		})
	}
}

// TestSuspendWithoutMemoryWarns: a suspend asked to keep the memory where
// the provider keeps it, that keeps only the files (an image), says so at
// warn: when the checkpoint fails, and when the sandbox is frozen (its
// agent cannot let go of its channel).
func TestSuspendWithoutMemoryWarns(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		frozen     bool
	}{
		{"checkpoint fails", "checkpoint failed", false},
		{"frozen", "frozen", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, logs := memoryEnv(t, contexts.Config{}, nil)
			id := ident("t1", "c", "main")
			rec := e.getOrCreate(id)
			if tc.frozen {
				if _, err := e.m.Pause(e.ctx, "t1", rec.ID, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			got, err := e.m.Suspend(e.ctx, "t1", rec.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Suspended() || got.KeepsMemory() {
				t.Fatalf("record after the suspend: %+v; want suspended with its files only", got)
			}
			var warned bool
			for _, l := range strings.Split(logs(), "\n") {
				warned = warned || strings.Contains(l, "level=WARN") && strings.Contains(l, "suspend without memory") && strings.Contains(l, tc.want)
			}
			if !warned {
				t.Fatalf("logs: %s\nwant a warning that the suspend kept no memory (%s)", logs(), tc.want)
			}
		})
	}
}
