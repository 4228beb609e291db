package e2bcompat

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Auto-resume (E2B's lifecycle autoResume): a paused sandbox created with
// it is resumed by the first request that reaches it, through envd, the
// code interpreter or one of its ports; that request waits for the resume
// and then goes through, so the caller sees a slower answer and nothing
// else. The sandbox resumes with the timeout its create asked for, as on
// E2B. Only a request the sandbox would serve wakes it: an envd or
// interpreter call with its credentials, a private port's request with
// the traffic token, any request to a public port (as on E2B, where
// public traffic resumes a sandbox). Without autoResume a paused sandbox
// answers as one that is not running until Sandbox.connect resumes it.
// A context suspended to disk by sandlot rather than paused by its caller
// (the idle suspend, /v1's suspend: Record.SuspendHeld false) is woken by
// the same requests whether or not it asked for auto-resume, as a call
// wakes it (docs/state.md, "Wake by port traffic").

// ErrPausedNoWake is what Wake answers for a paused sandbox without
// auto-resume (the ports route answers it like E2B's edge, 502).
var ErrPausedNoWake = fmt.Errorf("the sandbox is paused; Sandbox.connect resumes it: %w", errdefs.ErrFailedPrecondition)

// wake resumes rec when it is paused and asked for auto-resume, and
// returns the running record. A paused sandbox without auto-resume is
// ErrPausedNoWake. Concurrent wakes are fine: the loser of the race finds
// it running.
func (h *Handler) wake(ctx context.Context, tenantID string, rec *contexts.Record) (*contexts.Record, bool, error) {
	if !rec.Paused() {
		return rec, false, nil
	}
	if rec.Suspended() && !rec.SuspendHeld && rec.AutoResume <= 0 {
		// Suspended by sandlot (the idle suspend, /v1's suspend), not
		// paused by its caller: traffic wakes it as a call does.
		woken, err := h.edge.Manager().Wake(ctx, tenantID, rec.ID)
		if err != nil {
			return nil, false, fmt.Errorf("wake sandbox %s: %w", rec.ID, err)
		}
		h.edge.Logger().Info("e2b sandbox woken by traffic", logkey.Sandbox, rec.ID)
		return woken, true, nil
	}
	if rec.AutoResume <= 0 {
		return nil, false, ErrPausedNoWake
	}
	woken, err := h.edge.Manager().Resume(ctx, tenantID, rec.ID, rec.AutoResume)
	if errors.Is(err, contexts.ErrNotPaused) {
		rec, err = h.edge.Manager().Get(ctx, tenantID, rec.ID)
		return rec, true, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("auto-resume sandbox %s: %w", rec.ID, err)
	}
	h.edge.Logger().Info("e2b sandbox auto-resumed by traffic", logkey.Sandbox, rec.ID)
	return woken, true, nil
}

// Wake is the ports route's hook (network/ports Config.Wake): before a
// request to a sandbox's port goes through, a paused sandbox with
// auto-resume is resumed (resumed true); one without is ErrPausedNoWake;
// one that is gone is not_found. id is the sandbox's E2B id (its
// context's).
func (h *Handler) Wake(ctx context.Context, tenantID, id string) (resumed bool, err error) {
	rec, err := h.edge.Active(ctx, tenantID, id)
	if err != nil {
		return false, err
	}
	_, resumed, err = h.wake(ctx, tenantID, rec)
	return resumed, err
}
