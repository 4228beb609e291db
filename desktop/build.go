package desktop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/templates"
)

// Resources are the desktop template's defaults for its sandboxes' limits
// (where a request sets none): XFCE, x11vnc, websockify and a Chromium
// with a few tabs run 175-200 tasks, so the daemon's default of 256
// processes leaves little room; Chromium's profile and cache live in the
// writable layer.
var Resources = templates.Resources{
	MemoryBytes: 2 << 30,
	PIDs:        512,
	DiskBytes:   1 << 30,
}

// Settings are the built-in template's settings (templates.Config.Desktop).
func Settings() *templates.Settings {
	return &templates.Settings{Resources: Resources}
}

// retryAfter is how long a failed build is reported before the next use
// starts another (a mirror that was down may be back).
const retryAfter = time.Minute

// Builder makes sure the store has the desktop image, named Template,
// building it from Debian's mirror the first time it is asked for (it
// takes minutes; the default template's base is not needed). Safe for
// concurrent use.
type Builder struct {
	store *image.Store
	cfg   debian.Config
	log   *slog.Logger
	ctx   context.Context // the daemon's: a build ends with it

	mu       sync.Mutex
	building bool
	phase    string
	err      error
	failedAt time.Time
}

// NewBuilder returns a builder over store. A cached image of the current
// recipe is tagged Template at once; an image named Template that this
// recipe did not make (an operator's) is left alone; one an older recipe
// made keeps serving while the current one builds in the background.
func NewBuilder(ctx context.Context, store *image.Store, log *slog.Logger) *Builder {
	return newBuilder(ctx, store, log, ImageConfig())
}

func newBuilder(ctx context.Context, store *image.Store, log *slog.Logger, cfg debian.Config) *Builder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Builder{store: store, cfg: cfg, log: log, ctx: ctx}
	b.cfg.Logger = log
	key := b.cfg.Key()
	if img, err := store.Get(ctx, debian.CachePrefix+key); err == nil {
		if err := store.Tag(ctx, Template, img.Digest); err != nil {
			log.Warn("desktop template: tag", slog.String(logkey.Err, err.Error()))
		}
		return b
	}
	img, err := store.Get(ctx, Template)
	if err == nil && img.Config != nil {
		if k := img.Config.Config.Labels["org.sandlot.debian.key"]; k != "" && k != key {
			b.Start() // an older recipe's: replace it once the new one is built
		}
	}
	return b
}

// Start begins a build in the background unless one runs or the image is
// there; a failure is kept for retryAfter.
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
	b.log.Info("building the desktop template (once per image store; minutes)")
	img, err := debian.Ensure(b.ctx, b.store, b.cfg, Template, func(p debian.Progress) {
		b.mu.Lock()
		b.phase = fmt.Sprintf("%d/%d %s", p.Step, p.Steps, p.Phase)
		b.mu.Unlock()
		b.log.Info("building the desktop template", slog.Int("step", p.Step), slog.Int("steps", p.Steps),
			slog.String("phase", p.Phase), slog.Duration(logkey.Elapsed, time.Since(start).Round(time.Second)))
	})
	b.mu.Lock()
	b.building, b.err = false, err
	if err != nil {
		b.failedAt = time.Now()
	}
	b.mu.Unlock()
	if err != nil {
		b.log.Error("desktop template unavailable", slog.String(logkey.Err, err.Error()))
		return
	}
	b.log.Info("desktop template ready", slog.String("image", img.Digest.String()),
		slog.Duration(logkey.Elapsed, time.Since(start).Round(time.Millisecond)))
}

// Missing is the provider's answer for a template the store lacks
// (local.Config.Missing): for Template it starts the build and says how
// far it is (unavailable: try again) or why it failed; other names: nil.
func (b *Builder) Missing(template string) error {
	if template != Template {
		return nil
	}
	if _, err := b.store.Get(b.ctx, Template); err == nil {
		return nil // built meanwhile: the caller's next try finds it
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	b.Start()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return fmt.Errorf("the desktop template could not be built (%v): %w", b.err, errdefs.ErrFailedPrecondition)
	}
	return fmt.Errorf("the desktop template is being built from Debian's mirror (%s; minutes, once): try again shortly: %w", b.phase, errdefs.ErrUnavailable)
}

// Status reports the build: running, its phase and the last error.
func (b *Builder) Status() (building bool, phase string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.building, b.phase, b.err
}
