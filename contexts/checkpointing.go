package contexts

import (
	"fmt"

	"github.com/sandlot/sandlot/errdefs"
)

// A checkpoint of a running sandbox (a fork's, a suspend's with memory)
// starts with its agent letting go of its channel: every connection to
// it, the manager's too, closes, and the sandbox answers again only on a
// new one. A call in flight then, or one that pings the old connection
// before it is replaced, must not take that for the sandbox's death:
// the entry is marked for the checkpoint's length (beginCheckpoint), and
// such a failure answers a retryable error (errMoving) instead of ending
// the context. docs/state.md, "Fork with memory".

// beginCheckpoint marks e as checkpointing; the returned func unmarks it.
func (m *Manager) beginCheckpoint(e *entry) func() {
	if e == nil {
		return func() {}
	}
	m.mu.Lock()
	e.moving++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		e.moving--
		m.mu.Unlock()
	}
}

// connMoved reports whether sb, e's connection that just failed, failed
// because of a checkpoint: one is under way, or one ended and replaced
// sb (a fork's). Precondition: m.mu held.
func connMoved(e *entry, sb Sandbox) bool {
	return e.moving > 0 || e.sb != nil && e.sb != sb
}

// errMoving is the retryable error of a call on context id that met its
// checkpoint.
func errMoving(id string) error {
	return fmt.Errorf("context %s: its sandbox is being checkpointed; try again: %w", id, errdefs.ErrUnavailable)
}
