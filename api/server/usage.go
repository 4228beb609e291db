package server

import (
	"fmt"
	"net/http"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

// usage answers the key's tenant's quotas and its use of each
// (Config.Usage). An admin key reads its own tenant's too: quotas are per
// tenant, and no route names another's.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Usage == nil {
		s.writeError(w, r, fmt.Errorf("this server reports no usage: %w", errdefs.ErrFailedPrecondition))
		return
	}
	t := mustTenant(r)
	qs, err := s.cfg.Usage(r.Context(), t.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if qs == nil {
		qs = []api.Quota{}
	}
	writeJSON(w, http.StatusOK, api.Usage{Tenant: t.ID, Quotas: qs})
}
