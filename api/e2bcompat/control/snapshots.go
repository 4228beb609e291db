package control

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/templates"
)

// Snapshots: E2B's createSnapshot (POST /sandboxes/{id}/snapshots) makes a
// template of the tenant's from the sandbox's filesystem
// (templates.Catalog.Snapshot over the manager's Capture); GET /snapshots
// lists them; the SDK's deleteSnapshot is DELETE /templates/{id}, and a
// create from a snapshot is a create from that template. docs/state-snapshots.md.

// snapshotInfo is E2B's SnapshotInfo. snapshotID is the template's id:
// unique, so a create or a delete by it never meets a name another
// template shadows.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func infoOf(t templates.Template) snapshotInfo {
	return snapshotInfo{SnapshotID: t.ID, Names: []string{t.Name}}
}

// snapshotCapture is what a snapshot reads: the manager's Capture of the
// tenant's context.
func (h *Handler) snapshotCapture(tenantID, id string) templates.Capture {
	return func(ctx context.Context, w io.Writer, max int64) error {
		_, err := h.m.Capture(ctx, tenantID, id, w, max)
		return err
	}
}

func (h *Handler) createSnapshot(w http.ResponseWriter, r *http.Request, tenantID string) {
	var body struct {
		Name string `json:"name"`
	}
	id, rec, ok := h.lifecycleCall(w, r, tenantID, &body)
	if !ok {
		return
	}
	if err := h.catalogOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	t, _, err := h.cfg.Catalog.Snapshot(r.Context(), tenantID, templates.SnapshotSpec{ContextID: id, Template: rec.Template, Name: body.Name}, h.snapshotCapture(tenantID, id))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusCreated, infoOf(t))
}

// listSnapshots answers GET /snapshots (sandboxID, name, limit and
// nextToken: an offset into the list, newest first).
func (h *Handler) listSnapshots(w http.ResponseWriter, r *http.Request, tenantID string) {
	if h.cfg.Catalog == nil {
		core.WriteJSON(w, http.StatusOK, []snapshotInfo{})
		return
	}
	q := r.URL.Query()
	limit, offset := maxListLimit, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			core.WriteAPIError(w, fmt.Errorf("limit %q: %w", v, errdefs.ErrInvalidArgument))
			return
		}
		limit = min(n, maxListLimit)
	}
	if v := q.Get("nextToken"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			core.WriteAPIError(w, fmt.Errorf("nextToken %q: %w", v, errdefs.ErrInvalidArgument))
			return
		}
		offset = n
	}
	ts, _, err := h.cfg.Catalog.Snapshots(r.Context(), tenantID, q.Get("sandboxID"))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	out := []snapshotInfo{}
	name := templates.Canonical(q.Get("name"))
	for _, t := range ts {
		if name == "" || t.Name == name || t.ID == name {
			out = append(out, infoOf(t))
		}
	}
	out = out[min(offset, len(out)):]
	if len(out) > limit {
		out = out[:limit]
		w.Header().Set("X-Next-Token", strconv.Itoa(offset+limit))
	}
	core.WriteJSON(w, http.StatusOK, out)
}
