package local

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestCreateTimeout: a create that cannot be healthy within the sandbox-
// creation timeout (Config.ReadyTimeout, serve's --create-timeout) fails
// once it passes, as a timeout, and leaves no sandbox behind.
func TestCreateTimeout(t *testing.T) {
	p := newProviderWith(t, Config{Runtime: "crun", ReadyTimeout: 5 * time.Millisecond})
	start := time.Now()
	sb, err := p.Create(context.Background(), contexts.Spec{})
	if err == nil {
		sb.Close()
		t.Fatal("a create bounded by 5 ms succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errdefs.ErrDeadlineExceeded) && !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the create took %v past its 5 ms bound", d)
	}
	ids, err := p.List(context.Background())
	if err != nil || len(ids) != 0 {
		t.Fatalf("after the failed create: sandboxes %v, %v; want none", ids, err)
	}
}
