package contexts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// A pause that keeps the memory (E2B's pause(), and its onTimeout pause)
// costs the host that memory for as long as the sandbox is frozen: an
// idle paused sandbox weighs what a busy one does. Where the provider
// keeps memory on disk (CapMemory: runsc with the state dir on a disk)
// the pause is a suspend with the memory instead (suspendLocked: the
// kernels checkpointed, the sandbox stopped, the wake restores it), which
// holds no host memory (its writable layer is stowed on disk). Elsewhere,
// and for a sandbox that cannot be captured (the host template), it is
// the freezer (pauseLocked). docs/state.md, "Suspend with memory".

// PauseMemory pauses tenantID's ready context for at most keep, keeping
// its memory: checkpointed to disk where the provider can, frozen
// otherwise. Resume (and a wake) brings it back with its kernels as they
// were. A paused context, frozen or suspended, is ErrPaused.
func (m *Manager) PauseMemory(ctx context.Context, tenantID, contextID string, keep time.Duration) (*Record, error) {
	if keep <= 0 {
		return nil, fmt.Errorf("keep %s must be positive: %w", keep, errdefs.ErrInvalidArgument)
	}
	rec, unlock, err := m.lockForPause(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.pauseMemoryLocked(ctx, rec, keep)
}

// pauseMemoryLocked is PauseMemory under rec's identity lock.
func (m *Manager) pauseMemoryLocked(ctx context.Context, rec *Record, keep time.Duration) (*Record, error) {
	if rec.Paused() {
		return nil, pausedErr(rec.ID)
	}
	caps := m.provider.Capabilities()
	if images, ok := m.suspendImages(); ok && caps.Has(CapSnapshot|CapMemory) {
		out, err := m.suspendLocked(ctx, rec, images, keep, true)
		if err == nil || !errors.Is(err, errdefs.ErrFailedPrecondition) || !caps.Has(CapPause) {
			return out, err
		}
		// Nothing was captured (no layer to capture: the host template),
		// so nothing changed: the freezer keeps the memory.
		m.log.Info("pause with memory: frozen, not checkpointed", logkey.Context, rec.ID, logkey.Err, err)
	}
	if !caps.Has(CapPause) {
		return nil, fmt.Errorf("pause context %s: %w", rec.ID, NotSupported(m.provider.Name(), CapPause))
	}
	return m.pauseLocked(ctx, rec, keep)
}
