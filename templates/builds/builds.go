// Package builds is the daemon's queue of template builds: every build a
// tenant asks for over the network (E2B's Template.build, POST
// /v1/templates/builds) is a record here, with its build context staged in
// the image store's tmp/, its log (guarded, bounded), its status, and a
// slot among the builds that may run at once. One Queue serves every
// entry point of a daemon, so its limits (MaxRunning, MaxPerTenant) hold
// across them. The build itself is templates.Catalog.Build over an
// image/build Builder; what it makes is the tenant's template.
package builds

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/templates"
)

// Builder builds an image from a recipe; *build.Builder implements it.
type Builder interface {
	Build(ctx context.Context, rec *recipe.Recipe, opt build.Options) (build.Result, error)
}

var _ Builder = (*build.Builder)(nil)

// Catalog records what a build made, and resolves a FROM among the
// tenant's templates; *templates.Catalog implements it.
type Catalog interface {
	Build(ctx context.Context, tenantID string, spec templates.BuildSpec, run func(context.Context) (build.Result, error)) (templates.Template, error)
	Image(ctx context.Context, tenantID, ref string) (image.Image, error)
}

var _ Catalog = (*templates.Catalog)(nil)

// Config configures a Queue. Builder, Images and Catalog are required.
type Config struct {
	Builder Builder
	// Images is the store the builder writes to; build contexts are
	// staged in its tmp/.
	Images  *image.Store
	Catalog Catalog
	// Pull fetches a FROM image from its registry (auth: the recipe's
	// credentials, nil: none) when the FROM names no template of the
	// tenant, without naming it in the store (image/source.Pull with no
	// Name): serve's --build-pull. nil: such a FROM is not_found. A
	// tenant's FROM never reads the store's names or digests, which are
	// every tenant's images.
	Pull func(ctx context.Context, ref string, auth *recipe.RegistryAuth) (image.Image, error)
	// Guard filters build output (RUN steps' output, errors) before it
	// is kept for the caller; nil: as it is.
	Guard func(ctx context.Context, tenantID, text string) string
	// Timeout bounds one build from its start, waiting included; 0: 1 h.
	Timeout time.Duration
	// MaxUploadBytes bounds one upload into a build's context, compressed
	// and unpacked; 0: 1 GiB.
	MaxUploadBytes int64
	// MaxEntries bounds the tar entries of one upload; 0: 100,000.
	MaxEntries int
	// MaxRunning bounds the builds that run at once; the others wait
	// (status "waiting"). 0: 2.
	MaxRunning int
	// MaxPerTenant bounds a tenant's unfinished builds (requested, waiting
	// or running); one more is resource_exhausted. 0: 8.
	MaxPerTenant int
	// Logger; nil discards.
	Logger *slog.Logger
}

// Bounds on the state a build keeps in memory.
const (
	MaxLogLines  = 10000
	MaxLineBytes = 4 << 10
	// keepEnded: after a build ends, its status stays this long.
	keepEnded = time.Hour
	// keepRequested: a requested build never started is dropped after this.
	// Its context waits in the store's tmp/ without a lease (E2B's uploads
	// come before the start), where image GC leaves it for image.TmpGrace:
	// longer, or the constant below does not compile.
	keepRequested = time.Hour
	_             = uint(image.TmpGrace - keepRequested - 1)
)

// The statuses of a build.
const (
	Waiting  = "waiting"
	Building = "building"
	Ready    = "ready"
	Error    = "error"
)

// LogEntry is one line of a build's log.
type LogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
}

// Build is one requested build. Its exported fields do not change after
// Request; the others after mu are guarded by it.
type Build struct {
	ID         string
	TemplateID string // the record's id when chosen at request; "": a fresh one
	Name       string // the template's name, without a tag
	Tags       []string
	Tenant     string
	Dir        string // the build context, removed when the build ends
	source     string
	settings   templates.Settings
	requested  time.Time
	lease      *image.Lease // held from request to end, when asked

	mu       sync.Mutex
	status   string
	logs     []LogEntry
	reason   string
	started  bool
	ended    time.Time
	template templates.Template // the record, once ready
	tokens   map[string]string  // upload token -> the key it may upload
}

// Snapshot is a build's state for a status call.
type Snapshot struct {
	Status string
	// Logs are the entries from the offset asked for.
	Logs []LogEntry
	// Reason is why it failed (status error), guarded.
	Reason string
	// Template is the record made (status ready).
	Template *templates.Template
}

// Snapshot returns the build's state, with its log from entry offset.
func (b *Build) Snapshot(offset int) Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Snapshot{Status: b.status, Reason: b.reason, Logs: []LogEntry{}}
	if offset >= 0 && offset < len(b.logs) {
		s.Logs = append(s.Logs, b.logs[offset:]...)
	}
	if b.status == Ready {
		t := b.template
		s.Template = &t
	}
	return s
}

// Started reports whether the build was started (or dropped): its
// context takes no more uploads.
func (b *Build) Started() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.started
}

// NewToken returns a random token good for one upload of key into the
// build (like a presigned URL: it alone authorizes the upload).
func (b *Build) NewToken(key string) string {
	token := randomID() + randomID()
	b.mu.Lock()
	b.tokens[token] = key
	b.mu.Unlock()
	return token
}

// UseToken consumes token if it was made for key and the build has not
// started.
func (b *Build) UseToken(token, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for t, k := range b.tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 && k == key {
			delete(b.tokens, t) // one use
			return !b.started
		}
	}
	return false
}

func (b *Build) log(level, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(msg) > MaxLineBytes {
		msg = msg[:MaxLineBytes] + "…"
	}
	if len(b.logs) < MaxLogLines {
		b.logs = append(b.logs, LogEntry{Timestamp: time.Now().UTC(), Level: level, Message: msg})
	}
}

// Queue holds the builds by id. It is safe for concurrent use.
type Queue struct {
	cfg     Config
	log     *slog.Logger
	running chan struct{} // a token per running build (MaxRunning)

	mu   sync.Mutex
	byID map[string]*Build
}

// New returns a queue.
func New(cfg Config) *Queue {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Hour
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 1 << 30
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 100_000
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 2
	}
	if cfg.MaxPerTenant <= 0 {
		cfg.MaxPerTenant = 8
	}
	return &Queue{cfg: cfg, log: cfg.Logger, running: make(chan struct{}, cfg.MaxRunning), byID: map[string]*Build{}}
}

// MaxUploadBytes is the bound of one upload (Config.MaxUploadBytes).
func (q *Queue) MaxUploadBytes() int64 { return q.cfg.MaxUploadBytes }

// Request is what a build is asked for with.
type Request struct {
	// ID is the build's id; "": a random one.
	ID string
	// Spec names the template: Name (name or name:tag, checked by the
	// caller), Tags, the record's ID when chosen now, Source.
	Spec templates.BuildSpec
	// Settings override what the build gives the record (BuildSpec).
	Settings templates.Settings
	// Lease holds an image store lease from now until the build ends, so
	// GC (which empties tmp/) leaves the context alone while the build
	// waits for a slot. Entry points that start at once ask for it; E2B's,
	// whose body may come much later, does not.
	Lease bool
}

// Request records a build of tenantID's template, with an empty context
// directory in the store's tmp/. A tenant with MaxPerTenant unfinished
// builds gets resource_exhausted.
func (q *Queue) Request(ctx context.Context, tenantID string, req Request) (*Build, error) {
	name, tags, err := templates.BuildTags(req.Spec.Name, req.Spec.Tags)
	if err != nil {
		return nil, err
	}
	id := req.ID
	if id == "" {
		id = randomID()
	}
	b := &Build{ID: id, TemplateID: req.Spec.ID, Name: name, Tags: tags, Tenant: tenantID, source: req.Spec.Source,
		settings: req.Settings, requested: time.Now(), status: Waiting, tokens: map[string]string{}}
	if req.Lease {
		if b.lease, err = q.cfg.Images.Lease(ctx); err != nil {
			return nil, err
		}
	}
	b.Dir, err = os.MkdirTemp(filepath.Join(q.cfg.Images.Root(), "tmp"), "build-")
	if err != nil {
		b.lease.Release()
		return nil, fmt.Errorf("build context: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gc()
	n := 0
	for _, o := range q.byID {
		o.mu.Lock()
		if o.Tenant == tenantID && o.ended.IsZero() {
			n++
		}
		o.mu.Unlock()
	}
	if _, taken := q.byID[id]; taken || n >= q.cfg.MaxPerTenant {
		os.RemoveAll(b.Dir)
		b.lease.Release()
		if taken {
			return nil, fmt.Errorf("build %s: %w", id, errdefs.ErrAlreadyExists)
		}
		return nil, fmt.Errorf("%d template builds of this tenant are unfinished; wait for one to end: %w", n, errdefs.ErrResourceExhausted)
	}
	q.byID[id] = b
	return b, nil
}

// gc forgets builds that ended long ago, and requested builds never
// started. Precondition: q.mu held.
func (q *Queue) gc() {
	for id, b := range q.byID {
		b.mu.Lock()
		old := !b.ended.IsZero() && time.Since(b.ended) > keepEnded
		// A build holding a lease is in its request (its body still
		// coming): that request starts or aborts it.
		abandoned := !b.started && b.lease == nil && time.Since(b.requested) > keepRequested
		if abandoned {
			b.started, b.ended = true, time.Now() // no upload or start from now on
		}
		b.mu.Unlock()
		if old || abandoned {
			delete(q.byID, id)
		}
		if abandoned {
			os.RemoveAll(b.Dir)
			b.lease.Release()
		}
	}
}

// Get returns tenantID's build id; another tenant's is not_found.
func (q *Queue) Get(tenantID, id string) (*Build, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b, ok := q.byID[id]
	if !ok || b.Tenant != tenantID {
		return nil, fmt.Errorf("build %q: %w", id, errdefs.ErrNotFound)
	}
	return b, nil
}

// Lookup returns build id whoever owns it, or nil: for an upload that a
// token authorizes (Build.UseToken), never to show a build.
func (q *Queue) Lookup(id string) *Build {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.byID[id]
}

// Unstarted returns tenantID's build of the record id templateID that
// has not started (E2B's uploads name only the template).
func (q *Queue) Unstarted(tenantID, templateID string) (*Build, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range q.byID {
		b.mu.Lock()
		ok := b.Tenant == tenantID && b.TemplateID == templateID && !b.started
		b.mu.Unlock()
		if ok {
			return b, nil
		}
	}
	return nil, fmt.Errorf("no build of template %q waits for files: %w", templateID, errdefs.ErrNotFound)
}

// Start runs rec as build b in the background; a build starts once
// (already_exists after). ctx's values are kept, not its end.
func (q *Queue) Start(ctx context.Context, b *Build, rec *recipe.Recipe) error {
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		return fmt.Errorf("build %s already started: %w", b.ID, errdefs.ErrAlreadyExists)
	}
	b.started = true
	b.mu.Unlock()
	go q.run(context.WithoutCancel(ctx), b, rec)
	return nil
}

// Abort ends a requested build that will not start (its body was
// refused), with reason as its error.
func (q *Queue) Abort(b *Build, reason string) {
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		return
	}
	b.started, b.ended, b.status, b.reason = true, time.Now(), Error, reason
	b.mu.Unlock()
	os.RemoveAll(b.Dir)
	b.lease.Release()
}

func (q *Queue) run(ctx context.Context, b *Build, rec *recipe.Recipe) {
	ctx, cancel := context.WithTimeout(ctx, q.cfg.Timeout)
	defer cancel()
	defer b.lease.Release()
	select {
	case q.running <- struct{}{}:
		defer func() { <-q.running }()
	case <-ctx.Done():
	}
	b.mu.Lock()
	b.status = Building
	b.mu.Unlock()
	clean := func(s string) string {
		if q.cfg.Guard == nil {
			return s
		}
		return q.cfg.Guard(ctx, b.Tenant, s)
	}
	out := &lineWriter{b: b, clean: clean}
	// FROM resolves among the tenant's templates, then the registry
	// (from): never the shared store's names and digests.
	resolve := func(ctx context.Context, ref string) (image.Image, error) {
		step := rec.Steps[0]
		step.Image = ref
		return q.from(ctx, b.Tenant, step)
	}
	spec := templates.BuildSpec{ID: b.TemplateID, Name: b.Name, Tags: b.Tags, Source: b.source, Settings: b.settings}
	t, err := q.cfg.Catalog.Build(ctx, b.Tenant, spec, func(ctx context.Context) (build.Result, error) {
		if err := ctx.Err(); err != nil {
			return build.Result{}, fmt.Errorf("build waited past its time for a slot: %w", errdefs.ErrDeadlineExceeded)
		}
		return q.cfg.Builder.Build(ctx, rec, build.Options{
			ContextDir: b.Dir, Output: out, Resolve: resolve, Tenant: b.Tenant,
			Progress: func(s build.Step) {
				out.flush()
				b.log("info", clean(fmt.Sprintf("[%d/%d] %s", s.Index, s.Of, s.Text)))
			},
		})
	})
	out.flush()
	// The context goes before the build says it ended: whoever sees the
	// end sees no staging left.
	os.RemoveAll(b.Dir)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = time.Now()
	if err != nil {
		q.log.Info("template build failed", slog.String("template", b.Name), slog.String("build", b.ID), slog.String("err", err.Error()))
		b.status, b.reason = Error, clean(errdefs.PublicMessage(err))
		return
	}
	b.status, b.template = Ready, t
}

// from finds the image of a tenant's FROM step: one of the tenant's
// templates (its own, a public one, a built-in), else, where the daemon
// lets builds pull (Config.Pull), the registry's image of a reference.
// Never a name or a digest of the image store: those are shared by every
// tenant, so they would reach another tenant's private image. A FROM
// that is none of these is not_found, the same whether or not the store
// has something by that name.
func (q *Queue) from(ctx context.Context, tenantID string, step recipe.Step) (image.Image, error) {
	img, err := q.cfg.Catalog.Image(ctx, tenantID, step.Image)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return img, err
	}
	if err := q.pullable(step.Image); err != nil {
		return image.Image{}, err
	}
	return q.cfg.Pull(ctx, step.Image, step.RegistryAuth)
}

// pullable says why a FROM that is no template of the tenant cannot be
// pulled, or nil when it may be.
func (q *Queue) pullable(ref string) error {
	switch {
	case q.cfg.Pull == nil:
		return fmt.Errorf("FROM %s: no template of that name (FROM names one of your templates, a public one or a built-in; this daemon does not pull images for builds): %w", ref, errdefs.ErrNotFound)
	case strings.HasPrefix(ref, "sha256:"):
		return fmt.Errorf("FROM %s: no template of that name, and a digest alone names no registry image (write repository@sha256:…): %w", ref, errdefs.ErrNotFound)
	case slices.Contains(templates.Reserved, templates.Canonical(ref)):
		// A built-in without its image here (not offered, or still being
		// built) is not Docker Hub's library image of that name.
		return fmt.Errorf("FROM %s: the built-in template has no image on this daemon (yet): %w", ref, errdefs.ErrNotFound)
	}
	return nil
}

// CheckFrom tells a build that will not start because of its FROM before
// it is queued: not_found unless the FROM is one of tenantID's templates
// (its own, public, built-in) or a registry reference the build may pull
// (the pull happens when it runs).
func (q *Queue) CheckFrom(ctx context.Context, tenantID string, rec *recipe.Recipe) error {
	if len(rec.Steps) == 0 || rec.Steps[0].Kind != recipe.From {
		return fmt.Errorf("a recipe starts with FROM: %w", errdefs.ErrInvalidArgument)
	}
	ref := rec.Steps[0].Image
	if _, err := q.cfg.Catalog.Image(ctx, tenantID, ref); !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	return q.pullable(ref)
}

// lineWriter turns a build's output into log entries, a line each.
type lineWriter struct {
	b       *Build
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
	if len(lw.partial) > MaxLineBytes {
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

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
