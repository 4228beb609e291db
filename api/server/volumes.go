package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/volumes"
)

// Volumes is what /v1/volumes needs of the daemon's volumes
// (volumes.Service). Every call names the request's tenant: another
// tenant's volume is not_found, as a missing one is.
type Volumes interface {
	Create(ctx context.Context, tenantID, name string, size int64) (volumes.Volume, error)
	Get(ctx context.Context, tenantID, ref string) (volumes.Volume, error)
	List(ctx context.Context, tenantID string) ([]volumes.Volume, error)
	Delete(ctx context.Context, tenantID, ref string) error
	Usage(ctx context.Context, tenantID, ref string) (int64, error)
	Users(ctx context.Context, tenantID, ref string) ([]string, error)
}

func (s *Server) volumes(w http.ResponseWriter, r *http.Request) (Volumes, bool) {
	if s.cfg.Volumes == nil {
		s.writeError(w, r, fmt.Errorf("volumes are not enabled on this server (the local provider with a data dir and mkfs.ext4): %w", errdefs.ErrFailedPrecondition))
		return nil, false
	}
	return s.cfg.Volumes, true
}

func volumeOut(v volumes.Volume) api.Volume {
	return api.Volume{ID: v.ID, Name: v.Name, SizeBytes: v.SizeBytes, CreatedAt: v.CreatedAt}
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	var req api.VolumeRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := vs.Create(r.Context(), mustTenant(r).ID, req.Name, req.SizeBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, volumeOut(v))
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	list, err := vs.List(r.Context(), mustTenant(r).ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.VolumeList{Volumes: []api.Volume{}}
	for _, v := range list {
		out.Volumes = append(out.Volumes, volumeOut(v))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	t := mustTenant(r)
	v, err := vs.Get(r.Context(), t.ID, r.PathValue("nameOrId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := volumeOut(v)
	if out.UsedBytes, err = vs.Usage(r.Context(), t.ID, v.ID); err == nil {
		out.MountedBy, err = vs.Users(r.Context(), t.ID, v.ID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	if err := vs.Delete(r.Context(), mustTenant(r).ID, r.PathValue("nameOrId")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
