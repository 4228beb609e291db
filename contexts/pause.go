package contexts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Pausing is not a state of its own: a paused context stays ready (it is
// active, counts against the limits and keeps its identity), and its
// record says since when it is paused (Record.PausedAt). While paused its
// sandbox is frozen by the provider with its memory (kernels, variables,
// processes) kept; every call to it is refused with ErrPaused (never a
// health check, which a frozen agent could not answer and which would end
// it), and its expiresAt is the end of the pause's keep time: the cleanup
// loop ends it then, and not before, as it would an idle one. Resume
// thaws it and gives it a new TTL counted from then.

// ErrPaused and ErrNotPaused are the failed preconditions of a call that
// needs a running context and of a Resume of one that runs. Callers tell
// them apart with errors.Is (the E2B surface answers 409 to both).
var (
	ErrPaused    = fmt.Errorf("the context is paused: %w", errdefs.ErrFailedPrecondition)
	ErrNotPaused = fmt.Errorf("the context is not paused: %w", errdefs.ErrFailedPrecondition)
)

func pausedErr(id string) error {
	return fmt.Errorf("context %s is paused; resume it first: %w", id, ErrPaused)
}

// Pause freezes the sandbox of an active, ready context of tenantID and
// keeps it paused for at most keep, after which the cleanup loop ends it
// (reason expired). Calls that are under way when it pauses wait, frozen,
// until Resume (or fail by their own deadlines). A paused context is
// ErrPaused; a provider that cannot pause is failed_precondition.
func (m *Manager) Pause(ctx context.Context, tenantID, contextID string, keep time.Duration) (*Record, error) {
	if keep <= 0 {
		return nil, fmt.Errorf("keep %s must be positive: %w", keep, errdefs.ErrInvalidArgument)
	}
	if !m.provider.Capabilities().Has(CapPause) {
		return nil, fmt.Errorf("pause context %s: %w", contextID, NotSupported(m.provider.Name(), CapPause))
	}
	rec, unlock, err := m.lockForPause(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.pauseLocked(ctx, rec, keep)
}

// pauseLocked pauses rec. Precondition: its identity lock is held.
func (m *Manager) pauseLocked(ctx context.Context, rec *Record, keep time.Duration) (*Record, error) {
	contextID := rec.ID
	if rec.Paused() {
		return nil, pausedErr(contextID)
	}
	if err := m.provider.Pause(ctx, rec.SandboxID); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			if m.terminateRecord(ctx, rec, ReasonError, "sandbox lost") {
				m.markLost(rec.Identity)
			}
			return nil, fmt.Errorf("context %s: its sandbox is gone: %w", contextID, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("pause context %s: %w", contextID, err)
	}
	now := m.now()
	return m.savePause(ctx, rec, func(r *Record) {
		at := now.UTC()
		r.PausedAt = &at
		r.ExpiresAt = now.Add(keep)
	}, 0)
}

// Resume thaws a paused context of tenantID and sets its TTL to ttl from
// now (E2B: the connect or resume call's timeout). A running context is
// ErrNotPaused.
func (m *Manager) Resume(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*Record, error) {
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
	if rec.Suspended() {
		return m.wake(ctx, m.adopt(rec), ttl, nil)
	}
	// A sandbox found running was thawed by an earlier Resume whose
	// record write did not happen (a crash between the two): the record
	// catches up. A provider that cannot resume cannot have paused it.
	err = m.provider.Resume(ctx, rec.SandboxID)
	if errors.Is(err, ErrNotSupported) {
		return nil, fmt.Errorf("resume context %s: %w", contextID, err)
	}
	if err != nil && !errors.Is(err, errdefs.ErrFailedPrecondition) {
		if errors.Is(err, errdefs.ErrNotFound) {
			if m.terminateRecord(ctx, rec, ReasonError, "sandbox lost") {
				m.markLost(rec.Identity)
			}
			return nil, fmt.Errorf("context %s: its sandbox is gone: %w", contextID, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("resume context %s: %w", contextID, err)
	}
	now := m.now()
	return m.savePause(ctx, rec, func(r *Record) {
		r.PausedAt = nil
		r.LastUsedAt, r.ExpiresAt = now, now.Add(ttl)
	}, ttl)
}

// lockForPause loads an active, ready context of this node under its
// identity lock (so no call attaches to it meanwhile) and returns the
// newest copy: the in-memory one when this manager serves it.
func (m *Manager) lockForPause(ctx context.Context, tenantID, contextID string) (*Record, func(), error) {
	rec, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return nil, nil, err
	}
	if !rec.State.Active() {
		return nil, nil, fmt.Errorf("context %s has ended: %w", contextID, errdefs.ErrNotFound)
	}
	if err := m.servedElsewhere(ctx, rec); err != nil {
		return nil, nil, err
	}
	unlock, err := m.idLocks.lock(ctx, rec.Identity)
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	e := m.byID[contextID]
	if e != nil && !e.ended {
		rec = cloneRecord(e.rec)
	}
	m.mu.Unlock()
	switch {
	case !rec.State.Active():
		unlock()
		return nil, nil, fmt.Errorf("context %s has ended: %w", contextID, errdefs.ErrNotFound)
	case rec.State == StateReady && rec.Suspended():
		// No sandbox: the caller wakes it or refuses.
	case rec.State != StateReady || rec.SandboxID == "":
		unlock()
		return nil, nil, fmt.Errorf("context %s is still being created: %w", contextID, errdefs.ErrFailedPrecondition)
	}
	return rec, unlock, nil
}

// savePause applies change to the context's in-memory entry (if this
// manager serves it) and to its stored record; ttl > 0 becomes the entry's
// TTL. The entry's liveness proof is dropped: the sandbox must answer a
// health check before the next call after a pause or resume.
func (m *Manager) savePause(ctx context.Context, rec *Record, change func(*Record), ttl time.Duration) (*Record, error) {
	change(rec)
	defer m.changed(rec.TenantID, rec.ID)
	m.mu.Lock()
	e := m.byID[rec.ID]
	unsaved := false
	if e != nil && !e.ended {
		e.rec.PausedAt = cloneTime(rec.PausedAt)
		e.rec.SuspendImage, e.rec.SandboxID, e.rec.Template = rec.SuspendImage, rec.SandboxID, rec.Template
		e.rec.SuspendHeld = rec.SuspendHeld
		e.rec.LastUsedAt, e.rec.ExpiresAt = rec.LastUsedAt, rec.ExpiresAt
		e.alive = time.Time{}
		if ttl > 0 {
			e.ttl = ttl
		}
		unsaved = e.unsaved
	}
	m.mu.Unlock()
	if unsaved {
		return rec, nil
	}
	sctx := tctx(ctx, rec.TenantID)
	m.settle(ctx, e)
	cur, err := m.store.Get(sctx, rec.ID)
	if err != nil {
		m.log.Warn("store: load context to save its pause", logkey.Context, rec.ID, logkey.Err, err)
		return rec, nil
	}
	cur.PausedAt = rec.PausedAt
	cur.SuspendImage, cur.SandboxID, cur.Template = rec.SuspendImage, rec.SandboxID, rec.Template
	cur.SuspendHeld = rec.SuspendHeld
	cur.LastUsedAt, cur.ExpiresAt = rec.LastUsedAt, rec.ExpiresAt
	if err := m.store.Update(sctx, cur); err != nil {
		if errors.Is(err, errdefs.ErrFailedPrecondition) {
			return nil, fmt.Errorf("context %s has ended: %w", rec.ID, errdefs.ErrNotFound)
		}
		m.log.Warn("store: save the pause of a context", logkey.Context, rec.ID, logkey.Err, err)
	}
	return cloneRecord(cur), nil
}

// autoPause pauses an expired context that asked for it (AutoPause; to
// disk with AutoPauseToDisk, else with its memory as PauseMemory keeps
// it) instead of ending it, and reports whether it did. A suspend to disk
// whose capture fails freezes the sandbox instead, as PauseMemory does.
// Precondition: the identity lock is held.
func (m *Manager) autoPause(ctx context.Context, rec *Record) bool {
	if rec.AutoPause <= 0 || rec.Paused() || rec.State != StateReady || rec.SandboxID == "" {
		return false
	}
	var err error
	if rec.AutoPauseToDisk {
		images, ok := m.suspendImages()
		if !ok {
			m.log.Warn("auto-suspend at expiry: this daemon keeps no images; ending the context", logkey.Context, rec.ID)
			return false
		}
		_, err = m.suspendLocked(ctx, cloneRecord(rec), images, rec.AutoPause, false)
		if err != nil && freezable(err) && m.provider.Capabilities().Has(CapPause) {
			// The capture failed and the sandbox runs as it did: frozen,
			// it keeps more than was asked (its memory) rather than
			// losing its files with the context.
			m.logFrozen(rec, "auto-suspend at expiry: frozen, not suspended", err)
			_, err = m.pauseLocked(ctx, cloneRecord(rec), rec.AutoPause)
		}
	} else {
		_, err = m.pauseMemoryLocked(ctx, cloneRecord(rec), rec.AutoPause)
	}
	if err != nil {
		m.log.Warn("auto-pause at expiry failed; ending the context", logkey.Context, rec.ID, logkey.Err, err)
		return false
	}
	return true
}

// AutoPause pauses a context of tenantID that asked to pause at its
// expiry (Record.AutoPause) and whose expiry passed, before the cleanup
// loop gets to it; it returns the record as it is now. Anything else is
// returned unchanged.
func (m *Manager) AutoPause(ctx context.Context, tenantID, contextID string) (*Record, error) {
	rec, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	if !m.autoPauseDue(rec) {
		return rec, nil
	}
	rec, unlock, err := m.lockForPause(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !m.autoPause(ctx, rec) {
		return rec, nil
	}
	return m.Get(ctx, tenantID, contextID)
}

// autoPauseDue reports whether rec asked to pause at its expiry, and that
// expiry passed by the manager's clock while it still runs: the cleanup
// loop pauses it within its interval, AutoPause at once.
func (m *Manager) autoPauseDue(rec *Record) bool {
	return rec.AutoPause > 0 && !rec.Paused() && rec.State.Active() && !rec.ExpiresAt.After(m.now())
}
