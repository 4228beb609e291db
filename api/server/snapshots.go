package server

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// Snapshots is what /v1's snapshot routes need of the template catalog
// (*templates.Catalog): a snapshot is a template of the tenant's made from
// a context's filesystem (docs/state-snapshots.md).
type Snapshots interface {
	Snapshot(ctx context.Context, tenantID string, spec templates.SnapshotSpec, capture templates.Capture) (templates.Template, templates.Snapshot, error)
	Snapshots(ctx context.Context, tenantID, contextID string) ([]templates.Template, []templates.Snapshot, error)
	Delete(ctx context.Context, tenantID, ref string) error
}

var _ Snapshots = (*templates.Catalog)(nil)

func wireSnapshot(t templates.Template, sn templates.Snapshot) api.Snapshot {
	return api.Snapshot{ID: t.ID, Name: t.Name, ContextID: sn.ContextID, Template: sn.Template, Bytes: sn.Bytes, CreatedAt: sn.CreatedAt}
}

func (s *Server) snapshotsOf(w http.ResponseWriter, r *http.Request) (Snapshots, bool) {
	if s.cfg.Snapshots == nil || s.cfg.Capture == nil {
		s.writeError(w, r, fmt.Errorf("snapshots are not enabled on this server (no image store): %w", errdefs.ErrFailedPrecondition))
		return nil, false
	}
	return s.cfg.Snapshots, true
}

// createSnapshot: POST /v1/contexts/{id}/snapshots.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	sn, ok := s.snapshotsOf(w, r)
	if !ok {
		return
	}
	tn, _ := tenant.From(r.Context())
	var req api.SnapshotRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	rec, err := s.cfg.Contexts.Get(r.Context(), tn.ID, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !rec.State.Active() {
		s.writeError(w, r, fmt.Errorf("context %s has ended: %w", id, errdefs.ErrNotFound))
		return
	}
	t, rowOf, err := sn.Snapshot(r.Context(), tn.ID, templates.SnapshotSpec{ContextID: id, Template: rec.Template, Name: req.Name},
		func(ctx context.Context, w io.Writer, max int64) error { return s.cfg.Capture(ctx, tn.ID, id, w, max) })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, wireSnapshot(t, rowOf))
}

// listSnapshots: GET /v1/snapshots[?contextId=].
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	sn, ok := s.snapshotsOf(w, r)
	if !ok {
		return
	}
	tn, _ := tenant.From(r.Context())
	ts, rows, err := sn.Snapshots(r.Context(), tn.ID, r.URL.Query().Get("contextId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.SnapshotList{Snapshots: []api.Snapshot{}}
	for i := range ts {
		out.Snapshots = append(out.Snapshots, wireSnapshot(ts[i], rows[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteSnapshot: DELETE /v1/snapshots/{id}: only a snapshot of the
// tenant's (a template that is not one is not_found here).
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	sn, ok := s.snapshotsOf(w, r)
	if !ok {
		return
	}
	tn, _ := tenant.From(r.Context())
	ref := r.PathValue("id")
	ts, _, err := sn.Snapshots(r.Context(), tn.ID, "")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, t := range ts {
		if t.ID == ref || t.Name == ref {
			if err := sn.Delete(r.Context(), tn.ID, t.ID); err != nil {
				s.writeError(w, r, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	s.writeError(w, r, fmt.Errorf("snapshot %q: %w", ref, errdefs.ErrNotFound))
}
