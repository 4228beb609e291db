// Package control serves E2B's control plane: sandboxes (/sandboxes,
// /v2/sandboxes: create, list, get, kill, timeouts, connect, pause and
// resume, metrics, network) and templates (/templates, /v2/templates,
// /v3/templates: builds, list, get, delete, aliases, tags). A sandbox is
// an execution context of the API key's tenant, its sandboxID the
// context id (docs/e2b.md). The metric samples it takes are its state of
// a sandbox; they go when the sandbox ends (core.Edge.OnForget).
package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
)

// Config configures the control plane. The facade (api/e2bcompat)
// documents each field and applies the defaults.
type Config struct {
	MaxTimeout     time.Duration
	PausedTimeout  time.Duration
	DefaultTimeout time.Duration
	Templates      map[string]string // E2B template names to sandlot's
	PlainPython    bool              // no IPython kernel at boot (bootKernels)
	DefaultOpen    func(tenantID string) bool
	Catalog        Catalog // nil: the template routes answer failed_precondition
	Builds         *Builds // nil: builds answer failed_precondition
	Volumes        Volumes // nil: the volume routes and volumeMounts answer failed_precondition
}

// Handler serves the control plane. It is safe for concurrent use.
type Handler struct {
	edge *core.Edge
	m    core.Manager
	cfg  Config
	mux  *http.ServeMux

	mu sync.Mutex
	// metrics holds the usage samples taken per sandbox (metrics.go).
	metrics map[string][]metricSample
}

// New returns the control plane of edge.
func New(edge *core.Edge, cfg Config) *Handler {
	h := &Handler{edge: edge, m: edge.Manager(), cfg: cfg, metrics: map[string][]metricSample{}}
	edge.OnForget(h.forget)
	h.mux = h.routes()
	return h
}

// ServeHTTP serves a control-plane call (authenticated by its API key).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// forget drops the metric samples of a sandbox that ended.
func (h *Handler) forget(sid string) {
	h.mu.Lock()
	delete(h.metrics, sid)
	h.mu.Unlock()
}

// Metadata keys with meaning to sandlot. A key under
// contexts.ReservedPrefix ("sandlot.") is refused on create: sandlot keeps
// its own state in the record's typed fields, so a sandbox's metadata is
// the caller's, as on E2B.
const (
	MetaConversation = "conversationId"
	MetaPath         = "pathId"
	MetaTask         = "taskId" // keys the sandbox before conversationId (the session-reuse order)
	// MetaUser names the end user behind the tenant's key: part of the
	// key, so two users who name the same conversation or task get two
	// sandboxes. Absent: no user.
	MetaUser = "userId"
)

// maxListLimit bounds one page of GET /v2/sandboxes.
const maxListLimit = 100

func (h *Handler) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sandboxes", h.authed(h.create))
	mux.HandleFunc("POST /v2/sandboxes", h.authed(h.create))
	mux.HandleFunc("GET /sandboxes", h.authed(h.listAll))
	mux.HandleFunc("GET /v2/sandboxes", h.authed(h.list))
	mux.HandleFunc("GET /sandboxes/{id}", h.authed(h.info))
	mux.HandleFunc("DELETE /sandboxes/{id}", h.authed(h.kill))
	mux.HandleFunc("POST /sandboxes/{id}/timeout", h.authed(h.setTimeout))
	mux.HandleFunc("POST /sandboxes/{id}/refreshes", h.authed(h.refresh))
	mux.HandleFunc("POST /sandboxes/{id}/connect", h.authed(h.connect))
	mux.HandleFunc("POST /v2/sandboxes/{id}/connect", h.authed(h.connect))
	mux.HandleFunc("POST /sandboxes/{id}/resume", h.authed(h.resume))
	mux.HandleFunc("POST /sandboxes/{id}/pause", h.authed(h.pause))
	mux.HandleFunc("GET /sandboxes/{id}/metrics", h.authed(h.metricsRoute))
	mux.HandleFunc("POST /sandboxes/{id}/snapshots", h.authed(h.createSnapshot))
	mux.HandleFunc("POST /sandboxes/{id}/fork", h.authed(h.fork))
	mux.HandleFunc("GET /snapshots", h.authed(h.listSnapshots))
	mux.HandleFunc("PUT /sandboxes/{id}/network", h.authed(h.updateNetwork))
	h.templateRoutes(mux)
	h.templateListRoutes(mux)
	h.templateTagRoutes(mux)
	h.volumeRoutes(mux)
	mux.HandleFunc("/", core.NoRoute)
	return mux
}

type controlFunc func(w http.ResponseWriter, r *http.Request, tenantID string)

// authed authenticates a control-plane call by its X-API-KEY and admits
// it under the tenant's in-flight limit.
func (h *Handler) authed(fn controlFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, err := h.edge.Authenticate(r.Context(), r.Header.Get(e2bwire.HeaderAPIKey))
		if err != nil {
			core.WriteAPIError(w, err)
			return
		}
		release, err := h.edge.Admit(r.Context(), t.ID)
		if err != nil {
			core.WriteAPIError(w, err)
			return
		}
		defer release()
		fn(w, r.WithContext(tenant.With(r.Context(), t)), t.ID)
	}
}

// timeoutOf converts a timeout in seconds from a request, refusing one
// above Config.MaxTimeout as E2B does (400).
func (h *Handler) timeoutOf(seconds int64) (time.Duration, error) {
	if seconds > int64(h.cfg.MaxTimeout/time.Second) {
		return 0, fmt.Errorf("timeout cannot be greater than %s (%d seconds): %w", durationText(h.cfg.MaxTimeout), int64(h.cfg.MaxTimeout/time.Second), errdefs.ErrInvalidArgument)
	}
	return time.Duration(seconds) * time.Second, nil
}

// durationText says 24h0m0s as "24 hours".
func durationText(d time.Duration) string {
	if d%time.Hour == 0 {
		if d == time.Hour {
			return "1 hour"
		}
		return strconv.FormatInt(int64(d/time.Hour), 10) + " hours"
	}
	return d.String()
}

// createBody is the body of POST /sandboxes and /v2/sandboxes. Fields the
// SDKs send that sandlot does not model (autoPause, secure, ...) are
// accepted and ignored.
type createBody struct {
	TemplateID          string             `json:"templateID"`
	Timeout             *int64             `json:"timeout"`
	Metadata            map[string]string  `json:"metadata"`
	EnvVars             map[string]string  `json:"envVars"`
	AllowInternetAccess *bool              `json:"allow_internet_access"`
	Network             *policy.E2BNetwork `json:"network"`
	// AutoPause (lifecycle onTimeout 'pause') pauses the sandbox at its
	// timeout instead of killing it (pause.go).
	AutoPause       *bool `json:"autoPause"`
	AutoPauseMemory *bool `json:"autoPauseMemory"`
	AutoResume      *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	VolumeMounts []volumeMountBody `json:"volumeMounts"` // volumes.go
}

// sandboxBody answers create and connect.
type sandboxBody struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken string  `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// detailBody answers GET /sandboxes/{id} and is one item of the lists.
type detailBody struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	Alias           string            `json:"alias,omitempty"`
	ClientID        string            `json:"clientID"`
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int               `json:"memoryMB"`
	DiskSizeMB      int               `json:"diskSizeMB"`
	EnvdVersion     string            `json:"envdVersion"`
	State           string            `json:"state"`
	Metadata        map[string]string `json:"metadata"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain"`
	// The sandbox's network policy (network.go); absent without one.
	AllowInternetAccess *bool              `json:"allowInternetAccess,omitempty"`
	Network             *policy.E2BNetwork `json:"network,omitempty"`
	// The volumes it mounts (getInfo only; volumes.go).
	VolumeMounts []volumeMountBody `json:"volumeMounts,omitempty"`
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, tenantID string) {
	var body createBody
	if err := core.DecodeBody(r, &body); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if err := contexts.CheckMetadata(body.Metadata); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if body.TemplateID == "" {
		body.TemplateID = "base"
	}
	body.TemplateID = templates.Canonical(body.TemplateID) // "name:latest" is "name"
	tmpl, ok := h.cfg.Templates[body.TemplateID]
	if !ok {
		tmpl = body.TemplateID
	}
	id := contexts.Identity{TenantID: tenantID, UserID: body.Metadata[MetaUser], ConversationID: body.Metadata[MetaConversation], PathID: body.Metadata[MetaPath]}
	if task := body.Metadata[MetaTask]; task != "" {
		id.ConversationID = task
	}
	var ctxID string
	if id.ConversationID == "" {
		// no conversation named: the sandbox is its own conversation
		id.ConversationID = uuid.NewString()
		ctxID = id.ConversationID
	}
	if id.PathID == "" {
		id.PathID = contexts.DefaultPath
	}
	ttl := h.cfg.DefaultTimeout
	if body.Timeout != nil && *body.Timeout > 0 {
		var err error
		if ttl, err = h.timeoutOf(*body.Timeout); err != nil {
			core.WriteAPIError(w, err)
			return
		}
	}
	autoPause, autoResume, toDisk, err := h.lifecycle(body, ttl)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	mounts, err := h.volumeMounts(r.Context(), tenantID, body.VolumeMounts)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	e2bDefaults := h.edge.Domain() != nil && h.cfg.DefaultOpen != nil && h.cfg.DefaultOpen(tenantID)
	netPolicy, err := createNetwork(body.AllowInternetAccess, body.Network)
	if err == nil {
		netPolicy, err = h.grantDefaults(tenantID, body, netPolicy)
	}
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if netPolicy == nil && body.AllowInternetAccess == nil && e2bDefaults {
		// The operator opted in to E2B's default: a create that names
		// no network gets the open internet and public ports, as on E2B.
		netPolicy = &policy.Policy{Mode: policy.Open, Ingress: policy.Ingress{Public: true}}
	}
	if netPolicy == nil && h.edge.Domain() != nil && tmpl == templates.Desktop {
		// A desktop is watched through its noVNC port, which the desktop
		// SDK opens in a browser (no traffic token header): without a
		// network asked for, it gets ports, public, and no egress
		// (docs/desktop.md). E2B's own default is public ports and open
		// egress.
		netPolicy = &policy.Policy{Ingress: policy.Ingress{Public: true}}
	}
	if h.edge.Domain() == nil && noEgress(netPolicy) {
		// A daemon without sandbox networks already gives every sandbox
		// no internet (and serves no ports): the request is met as it is.
		// The e2b provider asks this of every cloud it creates in, a
		// sandlot behind sandlot included.
		netPolicy = nil
	}
	// MaxExecutions -1: an E2B sandbox lives until its timeout or kill; the
	// manager's rotation would end it under a running session.
	// FixedExpiry: E2B's timeout is absolute; calls do not extend it, only
	// setTimeout (and connect or refreshes asking for more) moves it.
	rec, err := h.m.GetOrCreate(r.Context(), id, core.CreateOptions{ID: ctxID, Template: tmpl, TemplateName: body.TemplateID, TTL: ttl,
		Metadata: body.Metadata, Env: body.EnvVars, MaxExecutions: -1, FixedExpiry: true, AutoPause: autoPause, AutoPauseToDisk: toDisk, AutoResume: autoResume,
		Network: netPolicy, Prestart: h.bootKernels(body.TemplateID), WarmKernels: warmKernels(body.TemplateID), Volumes: mounts})
	if err != nil {
		h.edge.Logger().Warn("e2b create failed", logkey.Tenant, tenantID, logkey.Err, err)
		core.WriteAPIError(w, err)
		return
	}
	body2, err := h.sandboxBody(r.Context(), tenantID, rec)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusCreated, body2)
}

// sandboxBody answers create and connect, with fresh tokens: the envd
// token for every sandbox call, and the traffic token the code
// interpreter SDK sends on its calls to port 49999.
func (h *Handler) sandboxBody(ctx context.Context, tenantID string, rec *contexts.Record) (sandboxBody, error) {
	envd, err := h.edge.IssueToken(ctx, core.PurposeEnvd, tenantID, rec.ID)
	if err != nil {
		return sandboxBody{}, err
	}
	// The SDKs sign file URLs with the token create or connect gave them
	// (not getInfo's): those are the ones signed URLs are checked against.
	h.edge.RememberToken(rec.ID, envd)
	traffic, err := h.edge.IssueToken(ctx, core.PurposeTraffic, tenantID, rec.ID)
	if err != nil {
		return sandboxBody{}, err
	}
	return sandboxBody{
		SandboxID:          rec.ID,
		TemplateID:         templateOf(rec),
		ClientID:           core.ClientID,
		EnvdVersion:        core.EnvdVersion,
		EnvdAccessToken:    envd,
		TrafficAccessToken: traffic,
		Domain:             h.edge.Domain(),
	}, nil
}

// templateOf is a sandbox's E2B templateID: the name its create gave.
func templateOf(rec *contexts.Record) string {
	if rec.TemplateName != "" {
		return rec.TemplateName
	}
	if rec.Template != "" {
		return rec.Template
	}
	return "base"
}

func (h *Handler) detail(ctx context.Context, tenantID string, rec *contexts.Record, withToken bool) (detailBody, error) {
	// The caller's metadata as given: conversationId and pathId appear
	// only when the caller set them (they name the identity then).
	meta := maps.Clone(rec.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	d := detailBody{
		SandboxID:   rec.ID,
		TemplateID:  templateOf(rec),
		ClientID:    core.ClientID,
		StartedAt:   rec.CreatedAt.UTC(),
		EndAt:       rec.ExpiresAt.UTC(),
		CPUCount:    sandboxCPUs,
		MemoryMB:    sandboxMemBytes >> 20,
		DiskSizeMB:  sandboxDisk >> 20,
		EnvdVersion: core.EnvdVersion,
		State:       stateOf(rec),
		Metadata:    meta,
		Domain:      h.edge.Domain(),
	}
	networkDetail(&d, rec)
	if withToken {
		tok, err := h.edge.IssueToken(ctx, core.PurposeEnvd, tenantID, rec.ID)
		if err != nil {
			return d, err
		}
		d.EnvdAccessToken = tok
	}
	return d, nil
}

func (h *Handler) info(w http.ResponseWriter, r *http.Request, tenantID string) {
	rec, err := h.edge.Active(r.Context(), tenantID, r.PathValue("id"))
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	d, err := h.detail(r.Context(), tenantID, rec, true)
	if err == nil {
		d.VolumeMounts, err = h.sandboxVolumes(r.Context(), tenantID, rec.ID)
	}
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	core.WriteJSON(w, http.StatusOK, d)
}

func (h *Handler) kill(w http.ResponseWriter, r *http.Request, tenantID string) {
	id := r.PathValue("id")
	if _, err := h.edge.Active(r.Context(), tenantID, id); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if err := h.m.Terminate(r.Context(), tenantID, id, contexts.ReasonManual); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			err = core.NotFound(id)
		}
		core.WriteAPIError(w, err)
		return
	}
	// What the edge keeps of the sandbox went with its context (core.Edge.End).
	w.WriteHeader(http.StatusNoContent)
}

type timeoutBody struct {
	Timeout  *int64 `json:"timeout"`
	Duration *int64 `json:"duration"`
}

func (h *Handler) setTimeout(w http.ResponseWriter, r *http.Request, tenantID string) {
	var body timeoutBody
	if err := core.DecodeBody(r, &body); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if body.Timeout == nil || *body.Timeout < 0 {
		core.WriteAPIError(w, fmt.Errorf("timeout (seconds) is required: %w", errdefs.ErrInvalidArgument))
		return
	}
	ttl, err := h.timeoutOf(*body.Timeout)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	h.extend(w, r, tenantID, ttl, false)
}

// refresh extends the sandbox's life by duration seconds from now; it never
// shortens it.
func (h *Handler) refresh(w http.ResponseWriter, r *http.Request, tenantID string) {
	var body timeoutBody
	if err := core.DecodeBody(r, &body); err != nil {
		core.WriteAPIError(w, err)
		return
	}
	d := time.Duration(0)
	if body.Duration != nil && *body.Duration > 0 {
		var err error
		if d, err = h.timeoutOf(*body.Duration); err != nil {
			core.WriteAPIError(w, err)
			return
		}
	}
	h.extend(w, r, tenantID, d, true)
}

func (h *Handler) extend(w http.ResponseWriter, r *http.Request, tenantID string, ttl time.Duration, onlyLonger bool) {
	id := r.PathValue("id")
	rec, err := h.edge.Active(r.Context(), tenantID, id)
	if err != nil {
		core.WriteAPIError(w, err)
		return
	}
	if rec.Paused() {
		// Its timeout does not run while paused: connect sets it.
		core.WriteConflict(w, "sandbox "+id+" is paused; connect resumes it with a timeout")
		return
	}
	if ttl > 0 && (!onlyLonger || h.m.Now().Add(ttl).After(rec.ExpiresAt)) {
		if _, err := h.m.SetTTL(r.Context(), tenantID, id, ttl); err != nil {
			core.WriteAPIError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// interpreterTemplates are E2B's template names of the code interpreter
// (@e2b/code-interpreter creates code-interpreter-v1).
var interpreterTemplates = []string{"code-interpreter-v1", templates.CodeInterpreter}

// bootKernels are the kernels a new sandbox of E2B's template name starts
// at boot: the code interpreter's python kernel with IPython imported, as
// E2B's sandbox has its Jupyter kernel up when create returns, so the
// first runCode does not pay IPython's import (about a second of CPU).
// Other templates start none (a base sandbox runs commands).
func (h *Handler) bootKernels(e2bTemplate string) []string {
	if h.cfg.PlainPython || !slices.Contains(interpreterTemplates, e2bTemplate) {
		return nil
	}
	return []string{agent.PrestartIPython}
}

// warmKernels are the kernels a warm sandbox serving a create of E2B's
// template name has started (core.CreateOptions.WarmKernels): none for a
// base sandbox, which runs commands (a kernel it is asked for starts on
// its first use), so its pool's refills do not start a python kernel on
// the CPU the creates share; nil, the template's own pool (python
// started), for the code interpreter, whose first cell wants python.
func warmKernels(e2bTemplate string) []string {
	if slices.Contains(interpreterTemplates, e2bTemplate) {
		return nil
	}
	return []string{}
}

// Holds reports whether the control plane keeps anything of sandbox sid
// (metric samples): a sandbox that ended has nothing left.
func (h *Handler) Holds(sid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.metrics[sid]
	return ok
}
