package contexts_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store/memory"
)

// TestFailedKill: when the provider cannot destroy a sandbox, ending its
// context (by Terminate, or by expiry in the cleanup pass) logs a warning
// naming the sandbox, still marks the record terminated, and the next call
// of the identity gets a fresh context on a fresh sandbox (001 §5.2).
func TestFailedKill(t *testing.T) {
	for _, how := range []string{"terminate", "expiry"} {
		t.Run(how, func(t *testing.T) {
			var logs testenv.Buffer
			e := &env{t: t, ctx: context.Background(), p: contextstest.NewProvider(), store: memory.New(), clock: newClock()}
			e.start(contexts.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			id := ident("t1", "c1", "main")
			rec := e.getOrCreate(id)
			e.p.FailDestroy(errors.New("runtime refused the kill"))
			switch how {
			case "terminate":
				if err := e.m.Terminate(e.ctx, "t1", rec.ID, ""); err != nil {
					t.Fatalf("terminate with a failing destroy: %v", err)
				}
			case "expiry":
				e.clock.Advance(contexts.DefaultTTL + time.Minute)
				if _, err := e.m.Cleanup(e.ctx); err != nil {
					t.Fatalf("cleanup with a failing destroy: %v", err)
				}
			}
			if r := e.record(rec.ID); r.State != contexts.StateTerminated {
				t.Fatalf("record after the failed kill: %+v; want terminated", r)
			}
			if !e.running(rec.SandboxID) {
				t.Fatal("the fake destroyed the sandbox: the kill did not fail, the test proves nothing")
			}
			out := logs.String()
			for _, want := range []string{`level=WARN msg="destroy sandbox"`, rec.SandboxID, "runtime refused the kill"} {
				if !strings.Contains(out, want) {
					t.Errorf("log lacks %s:\n%s", want, out)
				}
			}
			again := e.getOrCreate(id)
			if again.ID == rec.ID || again.SandboxID == rec.SandboxID {
				t.Fatalf("next call got context %s on sandbox %s; want fresh ones (the old: %s on %s)", again.ID, again.SandboxID, rec.ID, rec.SandboxID)
			}
		})
	}
}
