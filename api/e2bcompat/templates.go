package e2bcompat

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/layer"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/templates"
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

// TemplateBuilder builds an image from a recipe; *build.Builder
// implements it.
type TemplateBuilder interface {
	Build(ctx context.Context, rec *recipe.Recipe, opt build.Options) (build.Result, error)
}

var _ TemplateBuilder = (*build.Builder)(nil)

// Builds configures the template build routes. Builder and Images are
// required, and Config.Catalog, which records what they build.
type Builds struct {
	Builder TemplateBuilder
	// Images is the store the builder writes to; uploads are staged in
	// its tmp/.
	Images *image.Store
	// Guard filters build output (RUN steps' output, errors) before it
	// leaves for the caller; nil: as it is.
	Guard func(ctx context.Context, tenantID, text string) string
	// Timeout bounds one build; 0: 1 h.
	Timeout time.Duration
	// MaxUploadBytes bounds one COPY upload, compressed and unpacked;
	// 0: 1 GiB.
	MaxUploadBytes int64
	// MaxRunning bounds the builds that run at once on this daemon; the
	// others wait (status "waiting"). 0: 2.
	MaxRunning int
	// MaxPerTenant bounds a tenant's unfinished builds (requested, waiting
	// or running); one more is resource_exhausted. 0: 8.
	MaxPerTenant int
}

// Bounds on build state kept in memory.
const (
	maxBuildLogLines  = 10000
	maxBuildLineBytes = 4 << 10
	keepBuilds        = time.Hour // after a build ends, its status stays this long
	// A requested build whose body never came is dropped after this.
	keepRequested = time.Hour
)

type buildLog struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
}

// tmplBuild is one requested build. Fields after mu are guarded by it.
type tmplBuild struct {
	id, name, tenant string
	templateID       string // the record's id once built
	dir              string // upload context, removed when the build ends
	tags             []string
	tokens           map[string]string // upload token -> files hash
	requested        time.Time

	mu      sync.Mutex
	status  string // waiting, building, ready, error
	logs    []buildLog
	reason  string
	started bool
	ended   time.Time
}

func (b *tmplBuild) log(level, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(msg) > maxBuildLineBytes {
		msg = msg[:maxBuildLineBytes] + "…"
	}
	if len(b.logs) < maxBuildLogLines {
		b.logs = append(b.logs, buildLog{Timestamp: time.Now().UTC(), Level: level, Message: msg})
	}
}

// builds holds the builds by id.
type builds struct {
	mu   sync.Mutex
	byID map[string]*tmplBuild
	// running has a token per build running (Builds.MaxRunning); made
	// on first use.
	running chan struct{}
}

func (h *Handler) templateRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v3/templates", h.authed(h.requestBuild))
	mux.HandleFunc("GET /templates/{templateID}/files/{hash}", h.authed(h.uploadLink))
	mux.HandleFunc("PUT /templates/{templateID}/files/{hash}", h.upload) // authorized by the link's token
	mux.HandleFunc("POST /v2/templates/{templateID}/builds/{buildID}", h.authed(h.startBuild))
	mux.HandleFunc("GET /templates/{templateID}/builds/{buildID}/status", h.authed(h.buildStatus))
}

func (h *Handler) buildsOn() error {
	if h.cfg.Builds == nil || h.cfg.Catalog == nil {
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
		writeAPIError(w, err)
		return
	}
	var body struct {
		Name  string   `json:"name"`
		Alias string   `json:"alias"`
		Tags  []string `json:"tags"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeAPIError(w, err)
		return
	}
	name := body.Name
	if name == "" {
		name = body.Alias
	}
	// E2B's "name:tag" and tags: each tag is kept (templates/tags.go).
	base, _, _ := strings.Cut(name, ":")
	if err := h.checkBuildName(base); err != nil {
		writeAPIError(w, err)
		return
	}
	name, tags, err := templates.BuildTags(name, body.Tags)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	dir, err := os.MkdirTemp(filepath.Join(h.cfg.Builds.Images.Root(), "tmp"), "e2b-build-")
	if err != nil {
		writeAPIError(w, err)
		return
	}
	tid := templates.NewID()
	b := &tmplBuild{id: buildIDOf(tid), templateID: tid, name: name, tenant: tenantID, dir: dir, tags: tags, tokens: map[string]string{},
		status: "waiting", requested: time.Now()}
	max := h.cfg.Builds.MaxPerTenant
	if max <= 0 {
		max = 8
	}
	h.builds.mu.Lock()
	h.gcBuilds()
	n := 0
	for _, o := range h.builds.byID {
		o.mu.Lock()
		if o.tenant == tenantID && o.ended.IsZero() {
			n++
		}
		o.mu.Unlock()
	}
	if n >= max {
		h.builds.mu.Unlock()
		os.RemoveAll(dir)
		writeAPIError(w, fmt.Errorf("%d template builds of this tenant are unfinished; wait for one to end: %w", n, errdefs.ErrResourceExhausted))
		return
	}
	h.builds.byID[b.id] = b
	h.builds.mu.Unlock()
	writeJSON(w, http.StatusAccepted, map[string]any{
		"templateID": b.templateID, "buildID": b.id, "aliases": []string{name}, "names": []string{name},
		"tags": tags, "public": false,
	})
}

// gcBuilds forgets builds that ended long ago, and requested builds never
// started. Precondition: h.builds.mu held.
func (h *Handler) gcBuilds() {
	for id, b := range h.builds.byID {
		b.mu.Lock()
		old := !b.ended.IsZero() && time.Since(b.ended) > keepBuilds
		abandoned := !b.started && time.Since(b.requested) > keepRequested
		if abandoned {
			b.started, b.ended = true, time.Now() // no upload or start from now on
		}
		b.mu.Unlock()
		if old || abandoned {
			delete(h.builds.byID, id)
		}
		if abandoned {
			os.RemoveAll(b.dir)
		}
	}
}

// build returns tenantID's build of templateID.
func (h *Handler) build(tenantID, templateID, buildID string) (*tmplBuild, error) {
	if err := h.buildsOn(); err != nil {
		return nil, err
	}
	h.builds.mu.Lock()
	defer h.builds.mu.Unlock()
	b, ok := h.builds.byID[buildID]
	if !ok || b.tenant != tenantID || b.templateID != templateID {
		return nil, fmt.Errorf("build %q of template %q: %w", buildID, templateID, errdefs.ErrNotFound)
	}
	return b, nil
}

// latestWaiting is tenantID's newest build of templateID not started yet
// (uploads name only the template).
func (h *Handler) latestWaiting(tenantID, templateID string) (*tmplBuild, error) {
	if err := h.buildsOn(); err != nil {
		return nil, err
	}
	h.builds.mu.Lock()
	defer h.builds.mu.Unlock()
	for _, b := range h.builds.byID {
		b.mu.Lock()
		ok := b.tenant == tenantID && b.templateID == templateID && !b.started
		b.mu.Unlock()
		if ok {
			return b, nil
		}
	}
	return nil, fmt.Errorf("no build of template %q waits for files: %w", templateID, errdefs.ErrNotFound)
}

var filesHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (h *Handler) uploadLink(w http.ResponseWriter, r *http.Request, tenantID string) {
	hash := r.PathValue("hash")
	if !filesHash.MatchString(hash) {
		writeAPIError(w, fmt.Errorf("files hash %q: %w", hash, errdefs.ErrInvalidArgument))
		return
	}
	b, err := h.latestWaiting(tenantID, r.PathValue("templateID"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	token := randomID() + randomID()
	b.mu.Lock()
	b.tokens[token] = hash
	b.mu.Unlock()
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// Like a presigned URL: the token alone authorizes this one upload.
	url := fmt.Sprintf("%s://%s/templates/%s/files/%s?build=%s&token=%s", scheme, r.Host, b.templateID, hash, b.id, token)
	writeJSON(w, http.StatusCreated, map[string]any{"present": false, "url": url})
}

func (h *Handler) upload(w http.ResponseWriter, r *http.Request) {
	if err := h.buildsOn(); err != nil {
		writeAPIError(w, err)
		return
	}
	h.builds.mu.Lock()
	b := h.builds.byID[r.URL.Query().Get("build")]
	h.builds.mu.Unlock()
	denied := fmt.Errorf("upload link invalid or used: %w", errdefs.ErrPermissionDenied)
	if b == nil || b.templateID != r.PathValue("templateID") {
		writeAPIError(w, denied)
		return
	}
	token, hash := r.URL.Query().Get("token"), r.PathValue("hash")
	b.mu.Lock()
	var found bool
	for t, hh := range b.tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 && hh == hash {
			delete(b.tokens, t) // one use
			found = true
			break
		}
	}
	started := b.started
	b.mu.Unlock()
	if !found || started {
		writeAPIError(w, denied)
		return
	}
	max := h.cfg.Builds.MaxUploadBytes
	if max <= 0 {
		max = 1 << 30
	}
	if r.ContentLength > max {
		writeAPIError(w, fmt.Errorf("upload over %d bytes: %w", max, errdefs.ErrResourceExhausted))
		return
	}
	br := bufio.NewReader(http.MaxBytesReader(w, r.Body, max))
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			writeAPIError(w, fmt.Errorf("upload: %v: %w", err, errdefs.ErrInvalidArgument))
			return
		}
		in = zr
	}
	// The same rules as an image layer: nothing lands outside the
	// build's directory, whatever the tar names or links; sizes bounded.
	if _, err := layer.Apply(r.Context(), b.dir, in, layer.Limits{MaxBytes: max, MaxEntries: 100_000}); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			err = fmt.Errorf("upload over %d bytes: %w", max, errdefs.ErrResourceExhausted)
		}
		writeAPIError(w, fmt.Errorf("upload: %w", err))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) startBuild(w http.ResponseWriter, r *http.Request, tenantID string) {
	b, err := h.build(tenantID, r.PathValue("templateID"), r.PathValue("buildID"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		writeAPIError(w, fmt.Errorf("read body: %w", errdefs.ErrInvalidArgument))
		return
	}
	rec, err := recipe.ParseE2B(body)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		writeAPIError(w, fmt.Errorf("build %s already started: %w", b.id, errdefs.ErrAlreadyExists))
		return
	}
	b.started = true
	b.mu.Unlock()
	go h.runBuild(context.WithoutCancel(r.Context()), b, rec)
	w.WriteHeader(http.StatusAccepted)
}

// lineWriter turns a build's output into log entries, a line each.
type lineWriter struct {
	b       *tmplBuild
	partial []byte
	clean   func(string) string
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.partial = append(lw.partial, p...)
	for {
		i := strings.IndexByte(string(lw.partial), '\n')
		if i < 0 {
			break
		}
		lw.b.log("info", lw.clean(string(lw.partial[:i])))
		lw.partial = lw.partial[i+1:]
	}
	if len(lw.partial) > maxBuildLineBytes {
		lw.b.log("info", lw.clean(string(lw.partial)))
		lw.partial = nil
	}
	return len(p), nil
}

func (lw *lineWriter) flush() {
	if len(lw.partial) > 0 {
		lw.b.log("info", lw.clean(string(lw.partial)))
		lw.partial = nil
	}
}

func (h *Handler) runBuild(ctx context.Context, b *tmplBuild, rec *recipe.Recipe) {
	bc := h.cfg.Builds
	timeout := bc.Timeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer os.RemoveAll(b.dir)
	h.builds.mu.Lock()
	if h.builds.running == nil {
		n := bc.MaxRunning
		if n <= 0 {
			n = 2
		}
		h.builds.running = make(chan struct{}, n)
	}
	running := h.builds.running
	h.builds.mu.Unlock()
	b.mu.Lock()
	b.status = "waiting"
	b.mu.Unlock()
	select {
	case running <- struct{}{}:
		defer func() { <-running }()
	case <-ctx.Done():
	}
	b.mu.Lock()
	b.status = "building"
	b.mu.Unlock()
	clean := func(s string) string {
		if bc.Guard == nil {
			return s
		}
		return bc.Guard(ctx, b.tenant, s)
	}
	out := &lineWriter{b: b, clean: clean}
	// FROM a name resolves among the tenant's templates first (its own,
	// the public ones, the built-ins), then as the builder's config says.
	resolve := func(ctx context.Context, ref string) (image.Image, error) {
		return h.cfg.Catalog.Image(ctx, b.tenant, ref)
	}
	_, err := h.cfg.Catalog.Build(ctx, b.tenant, templates.BuildSpec{ID: b.templateID, Name: b.name, Tags: b.tags, Source: "e2b build"},
		func(ctx context.Context) (build.Result, error) {
			return bc.Builder.Build(ctx, rec, build.Options{
				ContextDir: b.dir, Output: out, Resolve: resolve,
				Progress: func(s build.Step) {
					out.flush()
					b.log("info", clean(fmt.Sprintf("[%d/%d] %s", s.Index, s.Of, s.Text)))
				},
			})
		})
	out.flush()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = time.Now()
	if err != nil {
		h.log.Info("template build failed", "template", b.name, "build", b.id, "err", err)
		b.status, b.reason = "error", clean(errdefs.PublicMessage(err))
		return
	}
	b.status = "ready"
}

func (h *Handler) buildStatus(w http.ResponseWriter, r *http.Request, tenantID string) {
	b, err := h.build(tenantID, r.PathValue("templateID"), r.PathValue("buildID"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	offset := 0
	if s := r.URL.Query().Get("logsOffset"); s != "" {
		if _, err := fmt.Sscanf(s, "%d", &offset); err != nil || offset < 0 {
			writeAPIError(w, fmt.Errorf("logsOffset %q: %w", s, errdefs.ErrInvalidArgument))
			return
		}
	}
	b.mu.Lock()
	entries := []buildLog{}
	if offset < len(b.logs) {
		entries = append(entries, b.logs[offset:]...)
	}
	status, reason := b.status, b.reason
	b.mu.Unlock()
	logs := make([]string, len(entries))
	for i, e := range entries {
		logs[i] = e.Timestamp.Format(time.RFC3339) + " " + e.Message
	}
	resp := map[string]any{"templateID": b.templateID, "buildID": b.id, "status": status, "logEntries": entries, "logs": logs}
	if status == "error" {
		resp["reason"] = map[string]any{"message": reason}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Handler) aliasInfo(w http.ResponseWriter, r *http.Request, tenantID, alias string) {
	if _, ok := h.cfg.Templates[alias]; ok {
		writeJSON(w, http.StatusOK, map[string]any{"templateID": alias, "public": true})
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
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": t.ID, "public": t.TenantID != tenantID})
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
