package debian

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/internal/logkey"
)

// retryAfter is how long a failed build is reported before the next use
// starts another (a mirror that was down may be back).
const retryAfter = time.Minute

// Builder makes sure a store has the image of one built-in template
// (desktop, code-interpreter), named after the template, building it from
// Debian's mirror the first time it is asked for: it takes minutes, and
// the default template's base is not needed for it. Safe for concurrent
// use.
type Builder struct {
	store *image.Store
	name  string
	cfg   Config
	log   *slog.Logger
	ctx   context.Context // the daemon's: a build ends with it

	mu       sync.Mutex
	building bool
	phase    string
	err      error
	failedAt time.Time
	image    v1.Hash // the image the template is, once there is one (Image)
	ready    bool
}

// NewBuilder returns a builder of cfg's image for the template name over
// store. A cached image of the current recipe is tagged name at once; an
// image named name that this recipe did not make (an operator's) is left
// alone; one an older recipe made keeps serving while the current one
// builds in the background. What the store has now is the template's
// image from now on (Image), until a build of this builder replaces it:
// names read later are not followed.
func NewBuilder(ctx context.Context, store *image.Store, name string, cfg Config, log *slog.Logger) *Builder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Builder{store: store, name: name, cfg: cfg, log: log, ctx: ctx}
	b.cfg.Logger = log
	key := b.cfg.Key()
	if img, err := store.Get(ctx, CachePrefix+key); err == nil {
		if err := store.Tag(ctx, name, img.Digest); err != nil {
			log.Warn(name+" template: tag", slog.String(logkey.Err, err.Error()))
		}
		b.image, b.ready = img.Digest, true
		return b
	}
	img, err := store.Get(ctx, name)
	if err == nil {
		b.image, b.ready = img.Digest, true
		if img.Config != nil {
			if k := img.Config.Config.Labels["org.sandlot.debian.key"]; k != "" && k != key {
				b.Start() // an older recipe's: replace it once the new one is built
			}
		}
	}
	return b
}

// Image returns the digest of the template's image: what the store had
// when the builder was made, or what it built since; false while there
// is none. The built-in template resolves by it (templates.Config.Builtins),
// never by the store's name, which anything that writes the store reaches.
func (b *Builder) Image() (v1.Hash, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.image, b.ready
}

// Start begins a build in the background unless one runs; a failure is
// kept for retryAfter.
func (b *Builder) Start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.building || (b.err != nil && time.Since(b.failedAt) < retryAfter) {
		return
	}
	b.building, b.err, b.phase = true, nil, "starting"
	go b.run()
}

func (b *Builder) run() {
	start := time.Now()
	what := "building the " + b.name + " template"
	b.log.Info(what + " (once per image store; minutes)")
	img, err := Ensure(b.ctx, b.store, b.cfg, b.name, func(p Progress) {
		b.mu.Lock()
		b.phase = fmt.Sprintf("%d/%d %s", p.Step, p.Steps, p.Phase)
		b.mu.Unlock()
		b.log.Info(what, slog.Int("step", p.Step), slog.Int("steps", p.Steps),
			slog.String("phase", p.Phase), slog.Duration(logkey.Elapsed, time.Since(start).Round(time.Second)))
	})
	b.mu.Lock()
	b.building, b.err = false, err
	if err != nil {
		b.failedAt = time.Now()
	} else {
		b.image, b.ready = img.Digest, true
	}
	b.mu.Unlock()
	if err != nil {
		b.log.Error(b.name+" template unavailable", slog.String(logkey.Err, err.Error()))
		return
	}
	b.log.Info(b.name+" template ready", slog.String("image", img.Digest.String()),
		slog.Duration(logkey.Elapsed, time.Since(start).Round(time.Millisecond)))
}

// Missing is the provider's answer for a template the store lacks
// (local.Config.Missing): for the builder's template it starts the build
// and says how far it is (unavailable: try again) or why it failed; other
// names: nil.
func (b *Builder) Missing(template string) error {
	if template != b.name {
		return nil
	}
	if _, ok := b.Image(); ok {
		return nil // built meanwhile: the caller's next try finds it
	}
	b.Start()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return fmt.Errorf("the %s template could not be built (%v): %w", b.name, b.err, errdefs.ErrFailedPrecondition)
	}
	return errdefs.Public(fmt.Errorf("the %s template is being built from Debian's mirror (%s; minutes, once): try again shortly: %w", b.name, b.phase, errdefs.ErrUnavailable),
		fmt.Sprintf("The sandbox is still being prepared: the %s template is being built (%s; minutes, on its first use only); retry in a minute.", b.name, b.phase))
}

// Status reports the build: running, its phase and the last error.
func (b *Builder) Status() (building bool, phase string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.building, b.phase, b.err
}
