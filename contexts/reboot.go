package contexts

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// Reboot drops a paused context's memory and boots it again from its
// files, with ttl from now: E2B's connect({onResume: 'reboot'}). A
// context suspended with its memory is restored and suspended again
// without it, one paused with its memory (frozen) is suspended without
// it, and then the context wakes from its files. All of it is one
// operation under the context's identity lock, so no call runs on it
// between the steps (on the restored sandbox's memory, or waking it
// before the reboot does); a call that arrives meanwhile waits and runs
// on the rebooted sandbox. A running context is ErrNotPaused.
func (m *Manager) Reboot(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*Record, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("ttl %s must be positive: %w", ttl, errdefs.ErrInvalidArgument)
	}
	rec, unlock, err := m.lockForPause(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !rec.Paused() {
		return nil, fmt.Errorf("context %s: %w", contextID, ErrNotPaused)
	}
	e := m.adopt(rec)
	if rec.Suspended() && !rec.KeepsMemory() {
		return m.wake(ctx, e, ttl, nil) // its memory is gone already
	}
	if !m.provider.Capabilities().Has(CapSnapshot) {
		return nil, fmt.Errorf("reboot context %s: %w", contextID, NotSupported(m.provider.Name(), CapSnapshot))
	}
	images, ok := m.suspendImages()
	if !ok {
		return nil, fmt.Errorf("reboot context %s: this daemon keeps no images: %w", contextID, errdefs.ErrFailedPrecondition)
	}
	if rec.KeepsMemory() {
		// Its files as they were are in the checkpointed sandbox (and the
		// suspend's image): restored first, then suspended without it.
		if rec, err = m.wake(ctx, e, ttl, nil); err != nil {
			return nil, err
		}
	}
	if _, err := m.suspendLocked(ctx, rec, images, 0, false); err != nil {
		return nil, err
	}
	return m.wake(ctx, e, ttl, nil)
}
