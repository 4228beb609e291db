package server

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/templates"
)

// fork: POST /v1/contexts/{id}/fork {pathId}: the
// context's filesystem is captured as a snapshot template (named fork-…)
// and a new context starts from it on the path asked for of the source's
// conversation, by the source's user. A path is never forked implicitly (specification 001: a new
// path's branch starts fresh); this is the explicit ask. The new context's
// memory is not the source's (memory: false): its kernels start fresh.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	sn, ok := s.snapshotsOf(w, r)
	if !ok {
		return
	}
	tn := mustTenant(r)
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
	id := r.PathValue("id")
	src, err := s.cfg.Contexts.Get(r.Context(), tn.ID, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !src.State.Active() {
		s.writeError(w, r, fmt.Errorf("context %s has ended: %w", id, errdefs.ErrNotFound))
		return
	}
	to := contexts.Identity{TenantID: tn.ID, UserID: src.UserID, ConversationID: src.ConversationID, PathID: req.PathID}
	if to == src.Identity {
		s.writeError(w, r, invalid("the fork's path is the source's own (%s)", req.PathID))
		return
	}
	name := "fork-" + strings.ToLower(rand.Text()[:12])
	t, row, err := sn.Snapshot(r.Context(), tn.ID, templates.SnapshotSpec{ContextID: id, Template: src.Template, Name: name},
		func(ctx context.Context, w io.Writer, max int64) error { return s.cfg.Capture(ctx, tn.ID, id, w, max) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var rec *contexts.Record
	err = s.cfg.Contexts.Use(r.Context(), to, contexts.CreateOptions{Template: t.ID, Network: src.Network},
		func(ctx context.Context, got *contexts.Record, _ contexts.Sandbox) error { rec = got; return nil })
	if err == nil && rec.Template != t.ID {
		// The path already had a context, which runs its own template.
		err = errdefs.Sentence(errdefs.ErrAlreadyExists, "path %s of conversation %s already has a context (%s); end it first", req.PathID, to.ConversationID, rec.ID)
	}
	if err != nil {
		// A context already on that path, a limit: the fork's template
		// goes again.
		if derr := sn.Delete(context.WithoutCancel(r.Context()), tn.ID, t.ID); derr != nil {
			s.log.Warn("fork: its template stays", slog.String(logkey.Template, t.ID), slog.String(logkey.Err, derr.Error()))
		}
		s.writeError(w, r, fmt.Errorf("fork onto path %s: %w", req.PathID, err))
		return
	}
	writeJSON(w, http.StatusCreated, api.ForkResult{Context: contextOf(rec), Snapshot: wireSnapshot(t, row)})
}
