package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// WaitPool waits until m's warm pools, all templates and kernel sets
// added together, hold at least n ready sandboxes, for at most within (or
// until ctx ends). A run measures from full pools, as a daemon that has
// been up a while serves; one whose pools never fill says so instead of
// measuring cold creates as warm ones.
func WaitPool(ctx context.Context, m *contexts.Manager, n int64, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		got := m.Stats().PoolSize
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm pools hold %d of %d sandboxes after %v", got, n, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}
