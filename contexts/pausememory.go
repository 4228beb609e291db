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
// and for a sandbox whose capture fails before the checkpoint began (the
// host template, with nothing to capture; a layer over the limit; an
// image the store could not keep), it is the freezer (pauseLocked), as
// before pauses checkpointed: a pause, or the pause at expiry, never
// fails or ends a context the freezer could hold. docs/state.md,
// "Suspend with memory".

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
		if err == nil || !freezable(err) || !caps.Has(CapPause) {
			return out, err
		}
		m.logFrozen(rec, "pause with memory: frozen, not checkpointed", err)
	}
	if !caps.Has(CapPause) {
		return nil, fmt.Errorf("pause context %s: %w", rec.ID, NotSupported(m.provider.Name(), CapPause))
	}
	return m.pauseLocked(ctx, rec, keep)
}

// untouchedError is a suspend's error raised before the checkpoint began:
// the capture or the image store refused (nothing to capture on the host
// template, a layer over the snapshot limit, a full disk, an image the
// store could not keep). The sandbox runs as it did, so a pause with
// memory can still freeze it. An error once the checkpoint began is not
// one: a failed checkpoint is the suspend's own fallback (an image, the
// files kept), and a record that could not be saved ended the context.
type untouchedError struct{ err error }

func (e untouchedError) Error() string { return e.err.Error() }
func (e untouchedError) Unwrap() error { return e.err }

// freezable reports whether a suspend's err left the sandbox as it was,
// so the freezer can pause it instead.
func freezable(err error) bool {
	var u untouchedError
	return errors.As(err, &u)
}

// logFrozen says (msg) that a pause froze rec's sandbox because its
// suspend failed with err before the checkpoint: at info for a sandbox
// with nothing to capture (the host template, whose pause is always the
// freezer's), at warn for anything else, which an operator wants to know
// of (the sandbox's memory stays on the host while it is paused).
func (m *Manager) logFrozen(rec *Record, msg string, err error) {
	if errors.Is(err, errdefs.ErrFailedPrecondition) {
		m.log.Info(msg, logkey.Context, rec.ID, logkey.Err, err)
		return
	}
	m.log.Warn(msg+": the capture failed", logkey.Context, rec.ID, logkey.Sandbox, rec.SandboxID, logkey.Err, err)
}
