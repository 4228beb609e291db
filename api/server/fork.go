package server

import (
	"context"
	"net/http"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Forker is what /v1's fork needs of the manager (contexts.Manager.Fork,
// which owns the fork: docs/state-snapshots.md, "Fork onto a path").
type Forker interface {
	Fork(ctx context.Context, tenantID, contextID, pathID string) (*contexts.ForkResult, error)
}

var _ Forker = (*contexts.Manager)(nil)

// fork: POST /v1/contexts/{id}/fork {pathId}: the context's filesystem is
// captured as a snapshot template (named fork-…) and a new context starts
// from it on the path asked for of the source's conversation, by the
// source's user. A path is never forked implicitly (specification 001: a
// new path's branch starts fresh); this is the explicit ask. The new
// context's memory is not the source's (memory: false): its kernels start
// fresh.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.snapshotsOf(w, r); !ok {
		return
	}
	tn := mustTenant(r)
	// The source is looked up first, so an id that is not the caller's is
	// 404 on any server, whether or not it can fork.
	if _, err := s.cfg.Contexts.Get(r.Context(), tn.ID, r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	f, ok := s.cfg.Contexts.(Forker)
	if !ok {
		s.writeError(w, r, errdefs.Sentence(errdefs.ErrFailedPrecondition, "this server cannot fork contexts"))
		return
	}
	var req api.ForkRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.PathID == "" {
		s.writeError(w, r, invalid("pathId is required: the path the fork goes onto"))
		return
	}
	if err := checkID("pathId", req.PathID); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := f.Fork(r.Context(), tn.ID, r.PathValue("id"), req.PathID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sn := res.Snapshot
	writeJSON(w, http.StatusCreated, api.ForkResult{Context: contextOf(res.Context), Memory: res.Memory,
		Snapshot: api.Snapshot{ID: sn.ID, Name: sn.Name, ContextID: sn.ContextID, Template: sn.Template, Bytes: sn.Bytes, CreatedAt: sn.CreatedAt}})
}
