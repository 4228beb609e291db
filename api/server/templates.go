package server

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/templates"
)

// Templates is what the template routes need (templates.Catalog
// implements it). Every call is for the request's tenant.
type Templates interface {
	List(ctx context.Context, tenantID string) ([]templates.Template, error)
	Resolve(ctx context.Context, tenantID, ref string) (templates.Template, error)
	Pull(ctx context.Context, tenantID, ref string, spec templates.Spec, progress func(image.Progress)) (templates.Template, error)
	ImportReader(ctx context.Context, tenantID string, r io.Reader, spec templates.Spec, progress func(image.Progress)) (templates.Template, error)
	Delete(ctx context.Context, tenantID, ref string) error
}

var _ Templates = (*templates.Catalog)(nil)

// DefaultMaxImportBytes bounds an uploaded image tarball.
const DefaultMaxImportBytes = 4 << 30

func (s *Server) templatesOf(w http.ResponseWriter, r *http.Request) (Templates, bool) {
	if s.cfg.Templates == nil {
		s.writeError(w, r, fmt.Errorf("templates are not enabled on this server (no image store): %w", errdefs.ErrFailedPrecondition))
		return nil, false
	}
	return s.cfg.Templates, true
}

// TemplateOut is a template as the API shows it.
func TemplateOut(t templates.Template) api.Template {
	st := t.Settings
	return api.Template{ID: t.ID, Name: t.Name, Public: t.Public(), BuiltIn: t.ID == t.Name, Image: t.Image, Source: t.Source,
		CreatedAt: t.CreatedAt, Settings: api.TemplateSettings{User: st.User, Workdir: st.Workdir, Env: st.Env, StartCmd: st.StartCmd,
			Kernels: st.Kernels, Prestart: st.Prestart, IdleSuspendSeconds: st.IdleSuspendSeconds, Resources: api.TemplateResources(st.Resources)}}
}

// TemplateSettingsIn is the API's settings as a record's.
func TemplateSettingsIn(st api.TemplateSettings) templates.Settings {
	return templates.Settings{User: st.User, Workdir: st.Workdir, Env: st.Env, StartCmd: st.StartCmd,
		Kernels: st.Kernels, Prestart: st.Prestart, IdleSuspendSeconds: st.IdleSuspendSeconds, Resources: templates.Resources(st.Resources)}
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	tc, ok := s.templatesOf(w, r)
	if !ok {
		return
	}
	list, err := tc.List(r.Context(), mustTenant(r).ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.TemplateList{Templates: []api.Template{}}
	for _, t := range list {
		out.Templates = append(out.Templates, TemplateOut(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	tc, ok := s.templatesOf(w, r)
	if !ok {
		return
	}
	t, err := tc.Resolve(r.Context(), mustTenant(r).ID, r.PathValue("nameOrId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TemplateOut(t))
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	tc, ok := s.templatesOf(w, r)
	if !ok {
		return
	}
	if err := tc.Delete(r.Context(), mustTenant(r).ID, r.PathValue("nameOrId")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// createTemplate pulls (a JSON body naming a registry reference) or
// imports (the body is an OCI layout or docker-archive tarball,
// Content-Type application/x-tar; name and settings in the query) a
// template for the request's tenant. It answers when the image is stored.
func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request) {
	tc, ok := s.templatesOf(w, r)
	if !ok {
		return
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	tid := mustTenant(r).ID
	var t templates.Template
	var err error
	switch ct {
	case "application/json", "":
		var req api.TemplateRequest
		if err := s.decodeJSON(w, r, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
		if req.Ref == "" {
			s.writeError(w, r, fmt.Errorf("ref is required (an image reference to pull; to import, send the tarball as application/x-tar): %w", errdefs.ErrInvalidArgument))
			return
		}
		t, err = tc.Pull(r.Context(), tid, req.Ref, templates.Spec{Name: req.Name, Settings: TemplateSettingsIn(req.Settings)}, nil)
	case "application/x-tar", "application/octet-stream":
		q := r.URL.Query()
		var st api.TemplateSettings
		if raw := q.Get("settings"); raw != "" {
			if err := api.UnmarshalStrict([]byte(raw), &st); err != nil {
				s.writeError(w, r, fmt.Errorf("settings: %w", err))
				return
			}
		}
		max := s.cfg.MaxImportBytes
		if r.ContentLength > max {
			s.writeError(w, r, &http.MaxBytesError{Limit: max})
			return
		}
		t, err = tc.ImportReader(r.Context(), tid, http.MaxBytesReader(w, r.Body, max), templates.Spec{Name: q.Get("name"), Settings: TemplateSettingsIn(st)}, nil)
	default:
		s.writeError(w, r, fmt.Errorf("Content-Type %q: application/json to pull, application/x-tar to import: %w", ct, errdefs.ErrInvalidArgument))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, TemplateOut(t))
}
