package contexts

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestPriority: a sandbox is raised exactly once, whether Foreground comes
// before the provider lowered it (Lowered raises at once) or after (the
// first Foreground raises it), and a raise's error reaches the caller.
func TestPriority(t *testing.T) {
	ctx := context.Background()
	var raised atomic.Int32
	raise := func(context.Context) error { raised.Add(1); return nil }

	var before Priority
	if !before.Low() {
		t.Fatal("a new priority is not low")
	}
	if err := before.Foreground(ctx); err != nil || before.Low() {
		t.Fatalf("Foreground before the start: %v, low %v", err, before.Low())
	}
	if err := before.Lowered(ctx, raise); err != nil || raised.Load() != 1 {
		t.Fatalf("Lowered after Foreground: %v, raised %d times, want once", err, raised.Load())
	}

	raised.Store(0)
	var after Priority
	if err := after.Lowered(ctx, raise); err != nil || raised.Load() != 0 {
		t.Fatalf("Lowered: %v, raised %d times, want none yet", err, raised.Load())
	}
	for range 2 {
		if err := after.Foreground(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if raised.Load() != 1 {
		t.Fatalf("raised %d times, want once", raised.Load())
	}

	boom := errors.New("boom")
	var failing Priority
	failing.Lowered(ctx, func(context.Context) error { return boom })
	if err := failing.Foreground(ctx); !errors.Is(err, boom) {
		t.Fatalf("a failed raise: %v", err)
	}
}
