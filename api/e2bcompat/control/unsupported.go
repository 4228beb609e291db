package e2bcompat

import "net/http"

// notSupported answers a control-plane call on a feature sandlot does not
// have: 404 for a sandbox that is not running (the SDK's
// SandboxNotFoundError), else 501 with a message naming the feature, so
// the SDK throws a SandboxError that says so instead of "not found".
func (h *Handler) notSupported(feature, why string) controlFunc {
	return func(w http.ResponseWriter, r *http.Request, tenantID string) {
		if _, err := h.active(r.Context(), tenantID, r.PathValue("id")); err != nil {
			writeAPIError(w, err)
			return
		}
		writeJSON(w, http.StatusNotImplemented, apiError{Code: http.StatusNotImplemented, Message: feature + " is not supported by sandlot: " + why})
	}
}

// noSnapshots answers GET /snapshots: sandlot takes none, so the list is
// empty.
func (h *Handler) noSnapshots(w http.ResponseWriter, r *http.Request, tenantID string) {
	writeJSON(w, http.StatusOK, []struct{}{})
}
