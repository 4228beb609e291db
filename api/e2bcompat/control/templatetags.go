package control

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/errdefs"
)

// E2B's template tags, as SDK 2.51 calls them (Template.assignTags,
// removeTags, getTags):
//
//	POST   /templates/tags {target: "name:tag", tags}  -> 201 {buildID, tags}
//	DELETE /templates/tags {name, tags}                -> 204
//	GET    /templates/{templateID}/tags                -> 200 [{tag, buildID, createdAt}]
//
// A tag is a record of its own ("name:tag", templates/tags.go), so
// Sandbox.create("name:tag") resolves like any name. Only the tenant's own
// templates are tagged or untagged; another tenant's are not found.

func (h *Handler) templateTagRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /templates/tags", h.authed(h.assignTags))
	mux.HandleFunc("DELETE /templates/tags", h.authed(h.removeTags))
	// GET /templates/aliases/{alias} and GET /templates/{templateID}/tags
	// overlap (/templates/aliases/tags) and neither is more specific, so
	// one pattern serves both.
	mux.HandleFunc("GET /templates/{templateID}/{sub}", h.authed(func(w http.ResponseWriter, r *http.Request, tenantID string) {
		switch id, sub := r.PathValue("templateID"), r.PathValue("sub"); {
		case id == "aliases":
			h.aliasInfo(w, r, tenantID, sub)
		case sub == "tags":
			h.listTags(w, r, tenantID)
		default:
			core.WriteAPIError(w, fmt.Errorf("no route GET %s: %w", r.URL.Path, errdefs.ErrNotFound))
		}
	}))
}

func (h *Handler) assignTags(w http.ResponseWriter, r *http.Request, tenantID string) {
	if err := h.catalogOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	var body struct {
		Target string   `json:"target"`
		Tags   []string `json:"tags"`
	}
	if err := core.DecodeBody(r, &body); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	src, err := h.cfg.Catalog.Tag(r.Context(), tenantID, body.Target, body.Tags)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusCreated, map[string]any{"buildID": buildIDOf(src.ID), "tags": body.Tags})
}

func (h *Handler) removeTags(w http.ResponseWriter, r *http.Request, tenantID string) {
	if err := h.catalogOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	var body struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if err := core.DecodeBody(r, &body); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if err := h.cfg.Catalog.Untag(r.Context(), tenantID, body.Name, body.Tags); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) listTags(w http.ResponseWriter, r *http.Request, tenantID string) {
	if err := h.catalogOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	ref := r.PathValue("templateID")
	if _, err := h.template(r.Context(), tenantID, ref); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	tags, err := h.cfg.Catalog.Tags(r.Context(), tenantID, ref)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	type tagOut struct {
		Tag       string    `json:"tag"`
		BuildID   string    `json:"buildID"`
		CreatedAt time.Time `json:"createdAt"`
	}
	out := make([]tagOut, 0, len(tags))
	for _, t := range tags {
		out = append(out, tagOut{Tag: t.Tag, BuildID: buildIDOf(t.Template.ID), CreatedAt: t.Template.CreatedAt.UTC()})
	}
	core.WriteJSON(w, http.StatusOK, out)
}
