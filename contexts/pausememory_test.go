package contexts_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// memoryFake is the fake provider claiming CapMemory; noLayer makes its
// capture refuse as the host template's does (no layer to capture), and
// captureErr, when set, is every capture's error.
type memoryFake struct {
	*contextstest.Provider
	noLayer    bool
	captureErr error
}

func (p memoryFake) Capabilities() contexts.Capabilities {
	return p.Provider.Capabilities() | contexts.CapMemory
}

func (p memoryFake) Capture(ctx context.Context, id string, w io.Writer, max int64) error {
	if p.noLayer {
		return errdefs.Sentence(errdefs.ErrFailedPrecondition, "sandbox %s has no image root", id)
	}
	if p.captureErr != nil {
		return p.captureErr
	}
	return p.Provider.Capture(ctx, id, w, max)
}

// TestPauseMemoryRoute: PauseMemory (E2B's pause with memory) suspends
// where the provider keeps memory and the sandbox can be captured, held
// for keep; freezes a sandbox that cannot be captured (the host
// template), and where the provider keeps no memory; a paused context,
// frozen or suspended, is ErrPaused, never suspended again without its
// memory.
func TestPauseMemoryRoute(t *testing.T) {
	for _, tc := range []struct {
		name        string
		p           contexts.Provider
		wantSuspend bool
	}{
		{"memory kept: suspended", memoryFake{Provider: contextstest.NewProvider()}, true},
		{"nothing to capture: frozen", memoryFake{Provider: contextstest.NewProvider(), noLayer: true}, false},
		{"no memory kept: frozen", contextstest.NewProvider(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := contexts.NewManager(memory.New(), tc.p, contexts.Config{PoolSize: -1, CleanupInterval: time.Hour, Catalog: &keeper{}})
			ctx := context.Background()
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			rec, err := m.GetOrCreate(ctx, contexts.Identity{TenantID: "t1", ConversationID: "c", PathID: "main"}, contexts.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.PauseMemory(ctx, "t1", rec.ID, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Paused() || got.Suspended() != tc.wantSuspend || tc.wantSuspend && !got.SuspendHeld {
				t.Fatalf("paused record: %+v, want paused, suspended %v (held)", got, tc.wantSuspend)
			}
			if !got.ExpiresAt.After(m.Now().Add(59 * time.Minute)) {
				t.Fatalf("expiry %v, want the keep time from now", got.ExpiresAt)
			}
			if _, err := m.PauseMemory(ctx, "t1", rec.ID, time.Hour); !errors.Is(err, contexts.ErrPaused) {
				t.Fatalf("second pause: %v, want ErrPaused", err)
			}
			if _, err := m.Resume(ctx, "t1", rec.ID, time.Minute); err != nil {
				t.Fatalf("resume: %v", err)
			}
			if got, _ := m.Get(ctx, "t1", rec.ID); got.Paused() {
				t.Fatalf("after resume: %+v", got)
			}
		})
	}
}
