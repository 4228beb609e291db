package control

import (
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Fork (POST /sandboxes/{id}/fork {count, timeout}): the sandbox's
// filesystem is captured once, as a snapshot template of the tenant's
// (snapshots.go), and count new sandboxes start from it, each a context of
// its own. Memory is not carried on the local runtimes: the forks' kernels
// and processes start fresh (docs/state-snapshots.md, "Fork"). The snapshot stays a
// template of the tenant's (named fork-…, listed with the snapshots),
// since the forks run on it; deleting it once they end frees its layer.

// maxForks bounds one fork call's count.
const maxForks = 10

// forkDefaultTimeout is E2B's default for the forks' timeout.
const forkDefaultTimeout = 15 * time.Second

type forkResult struct {
	Sandbox *sandboxBody   `json:"sandbox,omitempty"`
	Error   *core.APIError `json:"error,omitempty"`
}

func (h *Handler) fork(w http.ResponseWriter, r *http.Request, tenantID string) {
	var body struct {
		Count   *int   `json:"count"`
		Timeout *int64 `json:"timeout"`
	}
	id, rec, ok := h.lifecycleCall(w, r, tenantID, &body)
	if !ok {
		return
	}
	count := 1
	if body.Count != nil {
		count = *body.Count
	}
	if count < 1 || count > maxForks {
		core.WriteAPIError(w, fmt.Errorf("count %d: a fork makes 1 to %d sandboxes: %w", count, maxForks, errdefs.ErrInvalidArgument))
		return
	}
	ttl := forkDefaultTimeout
	if body.Timeout != nil && *body.Timeout > 0 {
		var err error
		if ttl, err = h.timeoutOf(*body.Timeout); err != nil {
			core.WriteAPIError(w, err)
			return
		}
	}
	if err := h.catalogOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	// The capture is the manager's (contexts.Manager.ForkSnapshot), as
	// /v1's fork onto a path; the forks are new conversations of E2B's.
	rec, t, err := h.m.ForkSnapshot(r.Context(), tenantID, id)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	out := make([]forkResult, 0, count)
	for range count {
		out = append(out, h.forkOne(r, tenantID, rec, t, ttl))
	}
	core.WriteJSON(w, http.StatusCreated, out)
}

// forkOne starts one sandbox from the fork's template, with the
// source's metadata, user and network.
// Where the source's memory was saved (t.Memory: runsc), each fork is
// restored from it, its kernels the source's; else it starts fresh.
func (h *Handler) forkOne(r *http.Request, tenantID string, src *contexts.Record, t contexts.SnapshotInfo, ttl time.Duration) forkResult {
	template := t.ID
	ctxID := uuid.NewString()
	id := contexts.Identity{TenantID: tenantID, UserID: src.UserID, ConversationID: ctxID, PathID: contexts.DefaultPath}
	meta := maps.Clone(src.Metadata)
	for _, k := range []string{MetaConversation, MetaPath, MetaTask} {
		delete(meta, k) // the fork is a conversation of its own
	}
	rec, err := h.m.GetOrCreate(r.Context(), id, core.CreateOptions{ID: ctxID, Template: template, TemplateName: template, TTL: ttl,
		Metadata: meta, MaxExecutions: -1, FixedExpiry: true, Network: src.Network, Prestart: h.bootKernels(templateOf(src)), MemoryCheckpoint: t.MemoryCheckpoint})
	if err == nil {
		var b sandboxBody
		if b, err = h.sandboxBody(r.Context(), tenantID, rec); err == nil {
			return forkResult{Sandbox: &b}
		}
	}
	h.edge.Logger().Warn("e2b fork: a sandbox did not start", logkey.Tenant, tenantID, logkey.Err, err)
	status := errdefs.HTTPStatus(err)
	return forkResult{Error: &core.APIError{Code: status, Message: core.PublicMessage(err)}}
}
