package control

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/templates"
)

// E2B's template list, get and delete, as its OpenAPI (and the SDK 2.51
// types) describe them:
//
//	GET    /templates, GET /v2/templates -> 200 [Template], ?limit=&nextToken=, X-Next-Token
//	GET    /templates/{templateID}       -> 200 TemplateWithBuilds
//	DELETE /templates/{templateID}       -> 204 (the SDK's Sandbox.deleteSnapshot; 404: false)
//
// {templateID} is a template id or a name (alias), resolved for the key's
// tenant: its own templates, the public ones and the built-ins. Another
// tenant's template is not found, whatever it is called.

// Catalog is the templates the E2B routes see; *templates.Catalog
// implements it.
type Catalog interface {
	Resolve(ctx context.Context, tenantID, ref string) (templates.Template, error)
	Named(ctx context.Context, tenantID, ref string) (templates.Template, error)
	List(ctx context.Context, tenantID string) ([]templates.Template, error)
	Delete(ctx context.Context, tenantID, ref string) error
	Build(ctx context.Context, tenantID string, spec templates.BuildSpec, run func(context.Context) (build.Result, error)) (templates.Template, error)
	Image(ctx context.Context, tenantID, ref string) (image.Image, error)
	Tag(ctx context.Context, tenantID, target string, tags []string) (templates.Template, error)
	Untag(ctx context.Context, tenantID, name string, tags []string) error
	Tags(ctx context.Context, tenantID, ref string) ([]templates.TagInfo, error)
	// Snapshot and Snapshots: snapshots.go.
	Snapshot(ctx context.Context, tenantID string, spec templates.SnapshotSpec, capture templates.Capture) (templates.Template, templates.Snapshot, error)
	Snapshots(ctx context.Context, tenantID, contextID string) ([]templates.Template, []templates.Snapshot, error)
}

var _ Catalog = (*templates.Catalog)(nil)

func (h *Handler) templateListRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /templates", h.authed(h.listTemplates))
	mux.HandleFunc("GET /v2/templates", h.authed(h.listTemplates))
	mux.HandleFunc("GET /templates/{templateID}", h.authed(h.getTemplate))
	mux.HandleFunc("DELETE /templates/{templateID}", h.authed(h.deleteTemplate))
}

func (h *Handler) catalogOn() error {
	if h.cfg.Catalog == nil {
		return fmt.Errorf("templates are not enabled on this server: %w", errdefs.ErrFailedPrecondition)
	}
	return nil
}

// template resolves ref for tenantID; unknown and unusable refs are one
// not_found.
func (h *Handler) template(ctx context.Context, tenantID, ref string) (templates.Template, error) {
	notFound := fmt.Errorf("template %q: %w", ref, errdefs.ErrNotFound)
	if h.cfg.Catalog == nil {
		return templates.Template{}, notFound
	}
	t, err := h.cfg.Catalog.Resolve(ctx, tenantID, ref)
	if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrInvalidArgument) {
		return templates.Template{}, notFound
	}
	return t, err
}

// buildIDOf is the build id of a template id: each build records a new
// template, so one id each, the same in the build's status and the
// template's listing.
func buildIDOf(templateID string) string {
	return uuid.NewSHA1(buildNamespace, []byte(templateID)).String()
}

var buildNamespace = uuid.MustParse("5b1f0c1e-7a7e-4c55-9a53-6e2d3c9f0b11")

// e2bTemplate is E2B's Template.
type e2bTemplate struct {
	TemplateID    string     `json:"templateID"`
	BuildID       string     `json:"buildID"`
	CPUCount      int        `json:"cpuCount"`
	MemoryMB      int64      `json:"memoryMB"`
	DiskSizeMB    int64      `json:"diskSizeMB"`
	Public        bool       `json:"public"`
	Aliases       []string   `json:"aliases"`
	Names         []string   `json:"names"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	CreatedBy     *struct{}  `json:"createdBy"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt"`
	SpawnCount    int64      `json:"spawnCount"`
	BuildCount    int        `json:"buildCount"`
	BuildStatus   string     `json:"buildStatus"`
	EnvdVersion   string     `json:"envdVersion"`
}

// e2bTemplateBuild is E2B's TemplateBuild.
type e2bTemplateBuild struct {
	BuildID     string    `json:"buildID"`
	CPUCount    int       `json:"cpuCount"`
	MemoryMB    int64     `json:"memoryMB"`
	DiskSizeMB  int64     `json:"diskSizeMB"`
	EnvdVersion string    `json:"envdVersion"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	FinishedAt  time.Time `json:"finishedAt"`
}

// e2bTemplateWithBuilds is E2B's TemplateWithBuilds.
type e2bTemplateWithBuilds struct {
	TemplateID    string             `json:"templateID"`
	Public        bool               `json:"public"`
	Aliases       []string           `json:"aliases"`
	Names         []string           `json:"names"`
	CreatedAt     time.Time          `json:"createdAt"`
	UpdatedAt     time.Time          `json:"updatedAt"`
	LastSpawnedAt *time.Time         `json:"lastSpawnedAt"`
	SpawnCount    int64              `json:"spawnCount"`
	Builds        []e2bTemplateBuild `json:"builds"`
}

// resources are t's sandbox sizes as E2B reports them: the template's own
// limits, else the sizes every sandbox reports.
func resources(t templates.Template) (cpus int, memMB, diskMB int64) {
	r := t.Settings.Resources
	cpus, memMB, diskMB = sandboxCPUs, sandboxMemBytes>>20, sandboxDisk>>20
	if r.CPUs > 0 {
		cpus = max(1, int(r.CPUs+0.5))
	}
	if r.MemoryBytes > 0 {
		memMB = r.MemoryBytes >> 20
	}
	if r.DiskBytes > 0 {
		diskMB = r.DiskBytes >> 20
	}
	return
}

func toE2BTemplate(tenantID string, t templates.Template) e2bTemplate {
	cpus, mem, disk := resources(t)
	base, _ := templates.SplitTag(t.Name) // a tag's record: the alias is its template's name
	return e2bTemplate{TemplateID: t.ID, BuildID: buildIDOf(t.ID), CPUCount: cpus, MemoryMB: mem, DiskSizeMB: disk,
		Public: t.TenantID != tenantID, Aliases: []string{base}, Names: []string{t.Name},
		CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.CreatedAt.UTC(), BuildCount: 1, BuildStatus: "ready", EnvdVersion: core.EnvdVersion}
}

func (h *Handler) listTemplates(w http.ResponseWriter, r *http.Request, tenantID string) {
	if err := h.catalogOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	limit, after, err := parseTemplatePage(r)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	list, err := h.cfg.Catalog.List(r.Context(), tenantID)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	page, next := templatePage(list, limit, after)
	out := make([]e2bTemplate, 0, len(page))
	for _, t := range page {
		out = append(out, toE2BTemplate(tenantID, t))
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	core.WriteJSON(w, http.StatusOK, out)
}

// parseTemplatePage reads a template list's limit (1..maxListLimit,
// default maxListLimit) and nextToken, as the sandbox list takes them.
func parseTemplatePage(r *http.Request) (limit int, after string, err error) {
	q := r.URL.Query()
	limit = maxListLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return 0, "", fmt.Errorf("limit must be a positive integer: %w", errdefs.ErrInvalidArgument)
		}
		limit = min(n, maxListLimit)
	}
	if t := q.Get("nextToken"); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		if err != nil || len(b) > 1024 || !strings.Contains(string(b), "\n") {
			return 0, "", fmt.Errorf("nextToken is not one this server issued: %w", errdefs.ErrInvalidArgument)
		}
		after = string(b)
	}
	return limit, after, nil
}

// templatePage sorts list by name then id and returns the limit items
// after the position after names ("name\nid", "" from the start), with
// the token of the next page ("" on the last one). A token names a
// position, not an item, so a template deleted between two pages does
// not break the walk.
func templatePage(list []templates.Template, limit int, after string) ([]templates.Template, string) {
	key := func(t templates.Template) string { return t.Name + "\n" + t.ID }
	slices.SortFunc(list, func(a, b templates.Template) int { return strings.Compare(key(a), key(b)) })
	if after != "" {
		i, _ := slices.BinarySearchFunc(list, after, func(t templates.Template, k string) int { return strings.Compare(key(t), k) })
		for i < len(list) && key(list[i]) <= after {
			i++
		}
		list = list[i:]
	}
	if len(list) <= limit {
		return list, ""
	}
	return list[:limit], base64.RawURLEncoding.EncodeToString([]byte(key(list[limit-1])))
}

func (h *Handler) getTemplate(w http.ResponseWriter, r *http.Request, tenantID string) {
	if err := h.catalogOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	t, err := h.template(r.Context(), tenantID, r.PathValue("templateID"))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	e := toE2BTemplate(tenantID, t)
	core.WriteJSON(w, http.StatusOK, e2bTemplateWithBuilds{TemplateID: e.TemplateID, Public: e.Public, Aliases: e.Aliases, Names: e.Names,
		CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt, Builds: []e2bTemplateBuild{{
			BuildID: e.BuildID, CPUCount: e.CPUCount, MemoryMB: e.MemoryMB, DiskSizeMB: e.DiskSizeMB, EnvdVersion: e.EnvdVersion,
			Status: "ready", CreatedAt: e.CreatedAt, UpdatedAt: e.CreatedAt, FinishedAt: e.CreatedAt,
		}}})
}

func (h *Handler) deleteTemplate(w http.ResponseWriter, r *http.Request, tenantID string) {
	if err := h.catalogOn(); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	ref := r.PathValue("templateID")
	t, err := h.template(r.Context(), tenantID, ref)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if err := h.cfg.Catalog.Delete(r.Context(), tenantID, t.ID); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
