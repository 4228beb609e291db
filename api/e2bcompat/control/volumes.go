package control

import (
	"context"
	"net/http"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/volumes"
)

// Volumes is what the volume routes and volumeMounts need of the
// daemon's volumes (volumes.Service). Every call names the key's tenant:
// another tenant's volume is not_found, as a missing one is.
type Volumes interface {
	Create(ctx context.Context, tenantID, name string, size int64) (volumes.Volume, error)
	Get(ctx context.Context, tenantID, ref string) (volumes.Volume, error)
	List(ctx context.Context, tenantID string) ([]volumes.Volume, error)
	Delete(ctx context.Context, tenantID, ref string) error
	Resolve(ctx context.Context, tenantID string, reqs []volumes.Request) ([]volumes.Mount, error)
	Mounts(ctx context.Context, tenantID, contextID string) ([]volumes.Mounted, error)
}

// volumeBody is E2B's Volume; with Token, its VolumeAndToken. The token
// is for E2B's volume content API, which sandlot does not serve (a
// volume's files are read and written from a sandbox that mounts it), so
// it is empty.
type volumeBody struct {
	VolumeID string  `json:"volumeID"`
	Name     string  `json:"name"`
	Token    *string `json:"token,omitempty"`
}

// volumeMountBody is one of create's volumeMounts: E2B mounts volumes by
// name, read-write.
type volumeMountBody struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

func (h *Handler) volumeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /volumes", h.authed(h.volumeCreate))
	mux.HandleFunc("GET /volumes", h.authed(h.volumeList))
	mux.HandleFunc("GET /volumes/{id}", h.authed(h.volumeGet))
	mux.HandleFunc("DELETE /volumes/{id}", h.authed(h.volumeDelete))
}

// volumes returns the daemon's volumes, or writes why there are none.
func (h *Handler) volumes(w http.ResponseWriter) Volumes {
	if h.cfg.Volumes == nil {
		core.WriteAPIError(w, errdefs.Sentence(errdefs.ErrFailedPrecondition, "volumes are not enabled on this server"))
	}
	return h.cfg.Volumes
}

func withToken(v volumes.Volume) volumeBody {
	empty := ""
	return volumeBody{VolumeID: v.ID, Name: v.Name, Token: &empty}
}

func (h *Handler) volumeCreate(w http.ResponseWriter, r *http.Request, tenantID string) {
	vs := h.volumes(w)
	if vs == nil {
		return
	}
	var body struct {
		Name string `json:"name"`
	}
	if err := core.DecodeBody(r, &body); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	v, err := vs.Create(r.Context(), tenantID, body.Name, 0)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusCreated, withToken(v))
}

func (h *Handler) volumeList(w http.ResponseWriter, r *http.Request, tenantID string) {
	vs := h.volumes(w)
	if vs == nil {
		return
	}
	list, err := vs.List(r.Context(), tenantID)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	out := make([]volumeBody, 0, len(list))
	for _, v := range list {
		out = append(out, volumeBody{VolumeID: v.ID, Name: v.Name})
	}
	core.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) volumeGet(w http.ResponseWriter, r *http.Request, tenantID string) {
	vs := h.volumes(w)
	if vs == nil {
		return
	}
	v, err := vs.Get(r.Context(), tenantID, r.PathValue("id"))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, withToken(v))
}

func (h *Handler) volumeDelete(w http.ResponseWriter, r *http.Request, tenantID string) {
	vs := h.volumes(w)
	if vs == nil {
		return
	}
	if err := vs.Delete(r.Context(), tenantID, r.PathValue("id")); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// volumeMounts resolves create's volumeMounts for tenantID: none is nil;
// on a server without volumes it is failed_precondition.
func (h *Handler) volumeMounts(ctx context.Context, tenantID string, ms []volumeMountBody) ([]volumes.Mount, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	if h.cfg.Volumes == nil {
		return nil, errdefs.Sentence(errdefs.ErrFailedPrecondition, "volumes are not enabled on this server")
	}
	reqs := make([]volumes.Request, 0, len(ms))
	for _, m := range ms {
		reqs = append(reqs, volumes.Request{Volume: m.Name, Path: m.Path})
	}
	return h.cfg.Volumes.Resolve(ctx, tenantID, reqs)
}

// sandboxVolumes is getInfo's volumeMounts: the volumes the sandbox
// mounts, by name; none (or no volumes on this server) is nil.
func (h *Handler) sandboxVolumes(ctx context.Context, tenantID, sandboxID string) ([]volumeMountBody, error) {
	if h.cfg.Volumes == nil {
		return nil, nil
	}
	ms, err := h.cfg.Volumes.Mounts(ctx, tenantID, sandboxID)
	if err != nil {
		return nil, err
	}
	var out []volumeMountBody
	for _, m := range ms {
		out = append(out, volumeMountBody{Name: m.Name, Path: m.Path})
	}
	return out, nil
}
