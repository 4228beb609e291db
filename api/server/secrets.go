package server

import (
	"fmt"
	"net/http"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/secret"
)

// Secrets are the routes of a tenant's secrets: PUT creates or replaces
// one (the value is write-only), GET lists them without values, DELETE
// removes one. Config.Secrets keeps them; Config.SecretsChanged learns of
// every change (the egress proxy reloads the tenant's sandboxes).

func (s *Server) secretsStore(w http.ResponseWriter, r *http.Request) (secret.Store, bool) {
	if s.cfg.Secrets == nil {
		s.writeError(w, r, fmt.Errorf("secrets are not enabled on this server (sandlot serve --network): %w", errdefs.ErrFailedPrecondition))
		return nil, false
	}
	return s.cfg.Secrets, true
}

func secretOut(sec secret.Stored) api.Secret {
	return api.Secret{Name: sec.Name, Hosts: sec.Hosts, Env: sec.Env, Placeholder: sec.Placeholder(), CreatedAt: sec.CreatedAt, UpdatedAt: sec.UpdatedAt}
}

func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) {
	st, ok := s.secretsStore(w, r)
	if !ok {
		return
	}
	var req api.SecretRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	t := mustTenant(r)
	sec, err := st.PutSecret(r.Context(), t.ID, secret.Stored{Name: r.PathValue("name"), Env: req.Env,
		Secret: secret.Secret{Hosts: req.Hosts, Value: req.Value}})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.SecretsChanged != nil {
		s.cfg.SecretsChanged(t.ID)
	}
	writeJSON(w, http.StatusOK, secretOut(sec))
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	st, ok := s.secretsStore(w, r)
	if !ok {
		return
	}
	list, err := st.ListSecrets(r.Context(), mustTenant(r).ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.SecretList{Secrets: []api.Secret{}}
	for _, sec := range list {
		out.Secrets = append(out.Secrets, secretOut(sec))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	st, ok := s.secretsStore(w, r)
	if !ok {
		return
	}
	t := mustTenant(r)
	if err := st.DeleteSecret(r.Context(), t.ID, r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.SecretsChanged != nil {
		s.cfg.SecretsChanged(t.ID)
	}
	w.WriteHeader(http.StatusNoContent)
}
