package contexts

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// restore wakes suspended e on its own sandbox, checkpointed with its
// memory (Checkpointer): its kernels, variables and processes are as they
// were, so the call is told nothing was lost (ExecuteResult.Restored, not
// Woken). The suspend's image is dropped once the record says so; the
// context keeps the template it ran on. Precondition: the identity lock
// is held and rec (e's record) is suspended with a sandbox id.
func (m *Manager) restore(ctx context.Context, e *entry, rec *Record, ttl time.Duration) (*Record, error) {
	start := time.Now()
	sb, err := m.provider.Restore(ctx, rec.SandboxID)
	if err != nil {
		if !errdefs.Categorized(err) {
			err = fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("restore context %s: %w", rec.ID, err)
	}
	restored := time.Since(start)
	now := m.now()
	img := rec.SuspendImage
	out, err := m.savePause(ctx, rec, func(r *Record) {
		r.PausedAt, r.SuspendImage = nil, ""
		r.LastUsedAt, r.ExpiresAt = now, now.Add(ttl)
	}, ttl)
	if err != nil {
		sb.Close()
		return nil, err
	}
	recorded := time.Since(start)
	m.dropImage(ctx, rec.TenantID, img)
	dropped := time.Since(start)
	m.mu.Lock()
	if e.ended {
		m.mu.Unlock()
		m.destroy(context.WithoutCancel(ctx), sb, sb.ID())
		return nil, fmt.Errorf("context %s has ended: %w", rec.ID, errdefs.ErrNotFound)
	}
	e.sb = sb
	e.woken, e.restored = false, true
	e.alive = time.Now()
	m.mu.Unlock()
	m.log.Info("context woken with its memory", logkey.Context, rec.ID, logkey.Tenant, rec.TenantID, logkey.Sandbox, sb.ID(),
		"restore", restored, "record", recorded-restored, "image", dropped-recorded)
	return out, nil
}

// isEnded reports whether e has ended.
func (e *entry) isEnded(m *Manager) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return e.ended
}

// takeRestored reports whether e woke from suspension with its memory and
// no call has said so yet, and clears it: one call reports it.
func (m *Manager) takeRestored(e *entry) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := e.restored
	e.restored = false
	return v
}
