package control

import (
	"net/http"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
)

// notSupported answers a control-plane call on a feature sandlot does not
// have: 404 for a sandbox that is not running (the SDK's
// SandboxNotFoundError), else 501 with a message naming the feature, so
// the SDK throws a SandboxError that says so instead of "not found".
func (h *Handler) notSupported(feature, why string) controlFunc {
	return func(w http.ResponseWriter, r *http.Request, tenantID string) {
		if _, err := h.edge.Active(r.Context(), tenantID, r.PathValue("id")); err != nil {
			core.WriteAPIError(w, err)
			return
		}
		core.WriteJSON(w, http.StatusNotImplemented, core.APIError{Code: http.StatusNotImplemented, Message: feature + " is not supported by sandlot: " + why})
	}
}
