package control

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
)

// E2B's Template.build, as SDK 2.51 calls it:
//
//	POST /v3/templates {name, tags?, cpuCount?, memoryMB?}  -> 202 {templateID, buildID, aliases, names, tags, public}
//	GET  /templates/{templateID}/files/{hash}               -> 201 {present, url?}   (per COPY step)
//	PUT  <url>  a tar (gzip by default) of the COPY sources, relative to the SDK's file context
//	POST /v2/templates/{templateID}/builds/{buildID} <the template body, recipe.ParseE2B> -> 202
//	GET  /templates/{templateID}/builds/{buildID}/status?logsOffset=N
//	     -> {templateID, buildID, status: building|ready|error, logEntries, logs, reason?}
//	GET  /templates/aliases/{alias}                         -> 200 {templateID, public} | 404
//
// A build records a template of the tenant (templates.Catalog.Build): the
// template id is chosen when the build is requested (a new one per build),
// the name is the tenant's alias. A successful build replaces the tenant's
// template of that name; another tenant's template of the same name is
// another template.

// Builds is the daemon's build queue (templates/builds), shared with
// /v1's build route so its limits hold across both.
type Builds = builds.Queue

func (h *Handler) templateRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v3/templates", h.authed(h.requestBuild))
	mux.HandleFunc("GET /templates/{templateID}/files/{hash}", h.authed(h.uploadLink))
	mux.HandleFunc("PUT /templates/{templateID}/files/{hash}", h.upload) // authorized by the link's token
	mux.HandleFunc("POST /v2/templates/{templateID}/builds/{buildID}", h.authed(h.startBuild))
	mux.HandleFunc("GET /templates/{templateID}/builds/{buildID}/status", h.authed(h.buildStatus))
}

func (h *Handler) buildsOn() error {
	if h.cfg.Builds == nil {
		return fmt.Errorf("template builds are not enabled on this server: %w", errdefs.ErrFailedPrecondition)
	}
	return nil
}

// checkBuildName checks a name a tenant builds: a template name, none of
// the built-ins' or the E2B names Config.Templates maps.
func (h *Handler) checkBuildName(name string) error {
	if _, reserved := h.cfg.Templates[name]; reserved || slices.Contains(templates.Reserved, name) {
		return fmt.Errorf("template name %q is reserved: %w", name, errdefs.ErrInvalidArgument)
	}
	if err := templates.CheckName(name); err != nil {
		return err
	}
	return nil
}

func (h *Handler) requestBuild(w http.ResponseWriter, r *http.Request, tenantID string) {
	if err := h.buildsOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	var body struct {
		Name  string   `json:"name"`
		Alias string   `json:"alias"`
		Tags  []string `json:"tags"`
	}
	if err := core.DecodeBody(r, &body); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	name := body.Name
	if name == "" {
		name = body.Alias
	}
	// E2B's "name:tag" and tags: each tag is kept (templates/tags.go).
	base, _, _ := strings.Cut(name, ":")
	if err := h.checkBuildName(base); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	name, tags, err := templates.BuildTags(name, body.Tags)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	tid := templates.NewID()
	b, err := h.cfg.Builds.Request(r.Context(), tenantID, builds.Request{ID: buildIDOf(tid),
		Spec: templates.BuildSpec{ID: tid, Name: name, Tags: tags, Source: "e2b build"}})
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusAccepted, map[string]any{
		"templateID": b.TemplateID, "buildID": b.ID, "aliases": []string{name}, "names": []string{name},
		"tags": tags, "public": false,
	})
}

// build returns tenantID's build of templateID.
func (h *Handler) build(tenantID, templateID, buildID string) (*builds.Build, error) {
	if err := h.buildsOn(); err != nil {
		return nil, err
	}
	b, err := h.cfg.Builds.Get(tenantID, buildID)
	if err != nil || b.TemplateID != templateID {
		return nil, fmt.Errorf("build %q of template %q: %w", buildID, templateID, errdefs.ErrNotFound)
	}
	return b, nil
}

var filesHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (h *Handler) uploadLink(w http.ResponseWriter, r *http.Request, tenantID string) {
	hash := r.PathValue("hash")
	if !filesHash.MatchString(hash) {
		core.WriteAPIError(w, fmt.Errorf("files hash %q: %w", hash, errdefs.ErrInvalidArgument))
		return
	}
	if err := h.buildsOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	b, err := h.cfg.Builds.Unstarted(tenantID, r.PathValue("templateID"))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	token := b.NewToken(hash)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// Like a presigned URL: the token alone authorizes this one upload.
	url := fmt.Sprintf("%s://%s/templates/%s/files/%s?build=%s&token=%s", scheme, r.Host, b.TemplateID, hash, b.ID, token)
	core.WriteJSON(w, http.StatusCreated, map[string]any{"present": false, "url": url})
}

func (h *Handler) upload(w http.ResponseWriter, r *http.Request) {
	if err := h.buildsOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	b := h.cfg.Builds.Lookup(r.URL.Query().Get("build"))
	denied := fmt.Errorf("upload link invalid or used: %w", errdefs.ErrPermissionDenied)
	if b == nil || b.TemplateID != r.PathValue("templateID") || !b.UseToken(r.URL.Query().Get("token"), r.PathValue("hash")) {
		core.WriteAPIError(w, denied)
		return
	}
	max := h.cfg.Builds.MaxUploadBytes()
	if r.ContentLength > max {
		core.WriteAPIError(w, fmt.Errorf("upload over %d bytes: %w", max, errdefs.ErrResourceExhausted))
		return
	}
	// Nothing lands outside the build's directory, whatever the tar names
	// or links; sizes bounded (templates/builds).
	if err := h.cfg.Builds.Unpack(r.Context(), b, http.MaxBytesReader(w, r.Body, max)); err != nil {
		core.WriteAPIError(w, fmt.Errorf("upload: %w", err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) startBuild(w http.ResponseWriter, r *http.Request, tenantID string) {
	b, err := h.build(tenantID, r.PathValue("templateID"), r.PathValue("buildID"))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		core.WriteAPIError(w, fmt.Errorf("read body: %w", errdefs.ErrInvalidArgument))
		return
	}
	rec, err := recipe.ParseE2B(body)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if err := h.cfg.Builds.Start(r.Context(), b, rec); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (h *Handler) buildStatus(w http.ResponseWriter, r *http.Request, tenantID string) {
	b, err := h.build(tenantID, r.PathValue("templateID"), r.PathValue("buildID"))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	offset := 0
	if s := r.URL.Query().Get("logsOffset"); s != "" {
		if _, err := fmt.Sscanf(s, "%d", &offset); err != nil || offset < 0 {
			core.WriteAPIError(w, fmt.Errorf("logsOffset %q: %w", s, errdefs.ErrInvalidArgument))
			return
		}
	}
	st := b.Snapshot(offset)
	logs := make([]string, len(st.Logs))
	for i, e := range st.Logs {
		logs[i] = e.Timestamp.Format(time.RFC3339) + " " + e.Message
	}
	resp := map[string]any{"templateID": b.TemplateID, "buildID": b.ID, "status": st.Status, "logEntries": st.Logs, "logs": logs}
	if st.Status == builds.Error {
		resp["reason"] = map[string]any{"message": st.Reason}
	}
	core.WriteJSON(w, http.StatusOK, resp)
}

func (h *Handler) aliasInfo(w http.ResponseWriter, r *http.Request, tenantID, alias string) {
	if _, ok := h.cfg.Templates[alias]; ok {
		core.WriteJSON(w, http.StatusOK, map[string]any{"templateID": alias, "public": true})
		return
	}
	// A name exists once any of its tags was built (Template.exists).
	var t templates.Template
	err := fmt.Errorf("template %q: %w", alias, errdefs.ErrNotFound)
	if h.cfg.Catalog != nil {
		t, err = h.cfg.Catalog.Named(r.Context(), tenantID, alias)
	}
	if errors.Is(err, errdefs.ErrInvalidArgument) {
		err = fmt.Errorf("template %q: %w", alias, errdefs.ErrNotFound)
	}
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, map[string]any{"templateID": t.ID, "public": t.TenantID != tenantID})
}
