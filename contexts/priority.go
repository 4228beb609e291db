package contexts

import (
	"context"
	"sync"
)

// Priority is the CPU priority of a sandbox a warm pool makes
// (Spec.Background): the lowest from its first process on, so that its
// start, its agent and its kernels yield to the requests of the sandboxes
// in use, until Foreground. A create calls Foreground when it takes the
// sandbox, and when it waits for one being made: the sandbox is then on
// that create's path. The zero value is low; safe for concurrent use.
type Priority struct {
	mu    sync.Mutex
	fg    bool
	raise func(context.Context) error // set by Lowered until Foreground
}

// Low reports whether the sandbox is to start at the lowest priority:
// Foreground was not called yet. Providers read it before they start it.
func (p *Priority) Low() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.fg
}

// Lowered is the provider's, once the sandbox runs at the lowest priority:
// raise gives it the normal one. When Foreground came first, Lowered
// raises it at once and returns raise's error.
func (p *Priority) Lowered(ctx context.Context, raise func(context.Context) error) error {
	p.mu.Lock()
	if !p.fg {
		p.raise = raise
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	return raise(ctx)
}

// Foreground gives the sandbox the normal priority, now if it runs and
// else from its start; it raises it once, however often it is called.
func (p *Priority) Foreground(ctx context.Context) error {
	p.mu.Lock()
	p.fg = true
	raise := p.raise
	p.raise = nil
	p.mu.Unlock()
	if raise == nil {
		return nil
	}
	return raise(ctx)
}
