package control

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Pause and resume, as E2B has them (docs/e2b-lifecycle.md, "Pause and resume"):
// pause keeps the sandbox's memory (contexts.Manager.PauseMemory: a
// checkpoint to disk on runsc, the freezer elsewhere), so kernels,
// variables, processes and files are there after a resume; while
// paused the sandbox is listed and shown with state "paused", its calls
// answer as a sandbox that is not running, and its timeout does not run
// (it is killed only after Config.PausedTimeout). connect resumes it with
// the connect's timeout (E2B's default 300 s); the older resume route with
// its own (E2B's default 15 s).

// E2B's defaults for the timeout of a connect (ConnectSandboxV2) and of a
// resume (ResumedSandbox) that name none.
const (
	connectDefaultTimeout = 300 * time.Second
	resumeDefaultTimeout  = 15 * time.Second
)

// stateOf is a sandbox's E2B state.
func stateOf(rec *contexts.Record) string {
	if rec.Paused() {
		return "paused"
	}
	return "running"
}

// pauseBody is the body of POST /sandboxes/{id}/pause.
type pauseBody struct {
	// Memory false asks for a file-system-only pause (resumed by a
	// reboot): a suspend to disk (contexts.Manager.Suspend).
	Memory *bool `json:"memory"`
}

// resumeBody is the body of connect and resume.
type resumeBody struct {
	Timeout *int64 `json:"timeout"`
	Memory  *bool  `json:"memory"`
}

func (h *Handler) pause(w http.ResponseWriter, r *http.Request, tenantID string) {
	var body pauseBody
	id, _, ok := h.lifecycleCall(w, r, tenantID, &body)
	if !ok {
		return
	}
	if body.Memory != nil && !*body.Memory {
		// keepMemory: false: suspended to disk, the memory freed; connect
		// boots it again from its files (docs/state.md, "Suspend to disk").
		if _, err := h.m.SuspendFiles(r.Context(), tenantID, id, h.cfg.PausedTimeout); err != nil {
			h.writeLifecycleError(w, id, err)
			return
		}
		h.edge.Paused(id)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// With its memory: checkpointed to disk where the provider can
	// (runsc), so a paused sandbox holds no memory on the host; frozen
	// elsewhere (docs/e2b-lifecycle.md, "Pause and resume").
	if _, err := h.m.PauseMemory(r.Context(), tenantID, id, h.cfg.PausedTimeout); err != nil {
		h.writeLifecycleError(w, id, err)
		return
	}
	h.edge.Paused(id)
	w.WriteHeader(http.StatusNoContent)
}

// connect answers a running sandbox with 200 (extending its timeout when
// the call asks for more) and resumes a paused one with 201.
func (h *Handler) connect(w http.ResponseWriter, r *http.Request, tenantID string) {
	var body resumeBody
	id, rec, ok := h.lifecycleCall(w, r, tenantID, &body)
	if !ok {
		return
	}
	ttl, err := h.resumeTimeout(body, connectDefaultTimeout)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	status := http.StatusOK
	if rec.Paused() {
		got, err := h.resumeRec(r, tenantID, id, body, ttl)
		switch {
		case errors.Is(err, contexts.ErrNotPaused):
			// Woken since it was read (traffic, another connect): it runs,
			// which is what a connect asks for.
			if rec, err = h.m.Get(r.Context(), tenantID, id); err != nil {
				h.writeLifecycleError(w, id, err)
				return
			}
		case err != nil:
			h.writeLifecycleError(w, id, err)
			return
		default:
			rec, status = got, http.StatusCreated
		}
	} else if body.Timeout != nil && *body.Timeout > 0 && h.m.Now().Add(ttl).After(rec.ExpiresAt) {
		if rec, err = h.m.SetTTL(r.Context(), tenantID, id, ttl); err != nil {
			core.WriteAPIError(w, err)
			return
		}
	}
	sb, err := h.sandboxBody(r.Context(), tenantID, rec)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, status, sb)
}

// resume is the older route: 201 for a paused sandbox, 409 for a running
// one.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, tenantID string) {
	var body resumeBody
	id, rec, ok := h.lifecycleCall(w, r, tenantID, &body)
	if !ok {
		return
	}
	if !rec.Paused() {
		core.WriteConflict(w, "sandbox "+id+" is already running")
		return
	}
	ttl, err := h.resumeTimeout(body, resumeDefaultTimeout)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if rec, err = h.resumeRec(r, tenantID, id, body, ttl); err != nil {
		h.writeLifecycleError(w, id, err)
		return
	}
	sb, err := h.sandboxBody(r.Context(), tenantID, rec)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusCreated, sb)
}

// lifecycleCall reads the body of a pause, connect or resume into body and
// finds the sandbox it names; when it cannot, it has answered and ok is
// false.
func (h *Handler) lifecycleCall(w http.ResponseWriter, r *http.Request, tenantID string, body any) (id string, rec *contexts.Record, ok bool) {
	if err := core.DecodeBody(r, body); err != nil {
		core.WriteAPIError(w, err)
		return "", nil, false
	}
	id = r.PathValue("id")
	rec, err := h.edge.Active(r.Context(), tenantID, id)
	if err != nil {
		core.WriteAPIError(w, err)
		return "", nil, false
	}
	return id, rec, true
}

// resumeTimeout is the timeout a connect or resume asks for, or def.
func (h *Handler) resumeTimeout(body resumeBody, def time.Duration) (time.Duration, error) {
	if body.Timeout == nil || *body.Timeout <= 0 {
		return def, nil
	}
	return h.timeoutOf(*body.Timeout)
}

// resumeRec resumes a paused sandbox. One paused without memory
// (suspended to disk) boots again from its files whatever onResume says,
// as E2B's 'restore' is a cold boot for a snapshot without memory; memory
// false (onResume: 'reboot') on one paused with its memory drops that
// memory and boots from the files, as one operation of the manager's
// (contexts.Manager.Reboot: no call lands between the steps).
func (h *Handler) resumeRec(r *http.Request, tenantID, id string, body resumeBody, ttl time.Duration) (*contexts.Record, error) {
	if body.Memory != nil && !*body.Memory {
		return h.m.Reboot(r.Context(), tenantID, id, ttl)
	}
	return h.m.Resume(r.Context(), tenantID, id, ttl)
}

// writeLifecycleError answers a failed pause or resume: a sandbox that is
// gone is E2B's 404, a pause of a paused one or a resume of a running one
// is 409.
func (h *Handler) writeLifecycleError(w http.ResponseWriter, id string, err error) {
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		core.WriteAPIError(w, core.NotFound(id))
	case errors.Is(err, contexts.ErrPaused), errors.Is(err, contexts.ErrSuspended):
		core.WriteConflict(w, "sandbox "+id+" is already paused")
	case errors.Is(err, contexts.ErrNotPaused):
		core.WriteConflict(w, "sandbox "+id+" is already running")
	default:
		core.WriteAPIError(w, err)
	}
}

// lifecycle reads a create's autoPause (E2B's lifecycle onTimeout
// 'pause') and autoResume: at its timeout the manager pauses the sandbox
// for Config.PausedTimeout instead of ending it (autoPause, 0 when not
// asked), and traffic resumes it with ttl, its create's timeout
// (autoResume, 0 when not asked; api/e2bcompat's wake.go). A pause
// without memory (keepMemory: false) is a suspend to disk at the timeout
// (toDisk); autoResume with it is a 400, as E2B refuses that pair.
func (h *Handler) lifecycle(body createBody, ttl time.Duration) (autoPause, autoResume time.Duration, toDisk bool, err error) {
	resume := body.AutoResume != nil && body.AutoResume.Enabled
	noMemory := body.AutoPauseMemory != nil && !*body.AutoPauseMemory
	if resume && noMemory {
		return 0, 0, false, fmt.Errorf("autoResume cannot be combined with onTimeout keepMemory: false: %w", errdefs.ErrInvalidArgument)
	}
	if resume {
		autoResume = ttl
	}
	if body.AutoPause == nil || !*body.AutoPause {
		return 0, autoResume, false, nil
	}
	// keepMemory: false: suspended to disk at the timeout, kept as a
	// paused sandbox is; connect boots it from its files.
	return h.cfg.PausedTimeout, autoResume, noMemory, nil
}
