package server

import (
	"fmt"
	"net/http"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/tenant"
)

// The routes of a tenant's own API keys: GET lists them (name, prefix,
// created, last used; never a key), POST makes one and answers it once,
// DELETE revokes one. A key id of another tenant is a 404, like any other
// tenant's object. Revoking ends the key's access at once on this daemon:
// Config.Auth forgets it when it can (*tenant.Authenticator.Forget).

func (s *Server) keysStore(w http.ResponseWriter, r *http.Request) (tenant.Keys, bool) {
	if s.cfg.Keys == nil {
		s.writeError(w, r, fmt.Errorf("API keys are not kept by this server's store: %w", errdefs.ErrFailedPrecondition))
		return nil, false
	}
	return s.cfg.Keys, true
}

func keyOut(k *tenant.Key, current string) api.APIKey {
	return api.APIKey{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, Current: k.ID == current}
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	st, ok := s.keysStore(w, r)
	if !ok {
		return
	}
	ks, err := st.ListKeys(r.Context(), mustTenant(r).ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cur := currentKeyID(ks, tenant.Prefix(APIKey(r)))
	out := api.APIKeyList{Keys: []api.APIKey{}}
	for _, k := range ks {
		out.Keys = append(out.Keys, keyOut(k, cur))
	}
	writeJSON(w, http.StatusOK, out)
}

// currentKeyID is the id of the one listed key with the request key's
// prefix, "" when none or several share it (a prefix is 10 characters of
// 44; a hint for the page, which warns before revoking it).
func currentKeyID(ks []*tenant.Key, prefix string) string {
	id := ""
	for _, k := range ks {
		if k.Prefix == prefix {
			if id != "" {
				return ""
			}
			id = k.ID
		}
	}
	return id
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	st, ok := s.keysStore(w, r)
	if !ok {
		return
	}
	var req api.APIKeyRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	key, err := tenant.NewKey()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	k := &tenant.Key{TenantID: mustTenant(r).ID, Name: req.Name, Prefix: tenant.Prefix(key)}
	if err := st.AddKey(r.Context(), k, tenant.HashKey(key)); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.auditKey(audit.Event{TenantID: k.TenantID, Kind: audit.KindKeyCreated,
		Detail: map[string]string{"key": k.ID, "prefix": k.Prefix, "name": k.Name}})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, api.APIKeyCreated{APIKey: keyOut(k, ""), Key: key})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	st, ok := s.keysStore(w, r)
	if !ok {
		return
	}
	t := mustTenant(r)
	hash, err := st.RevokeKey(r.Context(), t.ID, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.auditKey(audit.Event{TenantID: t.ID, Kind: audit.KindKeyRevoked, Detail: map[string]string{"key": r.PathValue("id")}})
	if f, ok := s.cfg.Auth.(interface{ Forget(keyHash string) }); ok {
		f.Forget(hash)
	}
	w.WriteHeader(http.StatusNoContent)
}

// auditKey adds a key's event to the tenant's trail (Config.AuditAdd).
func (s *Server) auditKey(ev audit.Event) {
	if s.cfg.AuditAdd != nil {
		s.cfg.AuditAdd(ev)
	}
}
