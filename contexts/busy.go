package contexts

import (
	"context"
	"fmt"
	"sync"
)

// busy counts background work Close waits for (destroys under way, tally
// writers). Guarded by the mutex its owner holds.
type busy struct {
	n    int
	idle chan struct{} // when set, closed once n drops to zero
}

// done ends one piece of work. Precondition: the owner's mutex held.
func (b *busy) done() {
	if b.n--; b.n == 0 && b.idle != nil {
		close(b.idle)
		b.idle = nil
	}
}

// wait returns once no work is under way, or with an error naming what
// is once ctx ends. mu is the owner's mutex, not held by the caller.
func (b *busy) wait(ctx context.Context, mu *sync.Mutex, what string) error {
	mu.Lock()
	if b.n == 0 {
		mu.Unlock()
		return nil
	}
	if b.idle == nil {
		b.idle = make(chan struct{})
	}
	idle := b.idle
	mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close context manager: %s: %w", what, ctx.Err())
	}
}
