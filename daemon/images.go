package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/codeinterp"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/provider/local"
)

// baseBuild tracks the default template's image while the daemon builds it.
type baseBuild struct {
	mu    sync.Mutex
	done  bool
	err   error
	phase string
	image v1.Hash // the default's image, once there is one
	ready bool
}

// missing is local.Config.Missing: why the default template cannot be
// used yet, or nil once it is built (or when it is not this build's).
func (b *baseBuild) missing(template string) error {
	if template != "" && template != local.DefaultTemplate {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.ready:
		return nil
	case b.err != nil:
		return fmt.Errorf("the default template could not be built (%v): %w", b.err, errdefs.ErrFailedPrecondition)
	case !b.done:
		return errdefs.Public(fmt.Errorf("the default template is being built (%s); try again in a few minutes: %w", b.phase, errdefs.ErrUnavailable),
			fmt.Sprintf("The sandbox is still being prepared: the default template is being built (%s; minutes, on the first start only); retry in a minute.", b.phase))
	}
	return nil
}

func (b *baseBuild) pin(d v1.Hash) {
	b.mu.Lock()
	b.image, b.ready = d, true
	b.mu.Unlock()
}

func (b *baseBuild) pinned() (v1.Hash, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.image, b.ready
}

// builtinImages are the built-in templates' images as this daemon found
// them at start or built them since (templates.Config.Builtins): a
// built-in never follows a name in the image store, which everything
// that writes the store reaches. With --default-image none, an operator's
// `default` the store did not have at start is read at its first use.
type builtinImages struct {
	store   *image.Store
	base    *baseBuild
	lazy    bool // --default-image none: base pins the store's default at first use
	builder map[string]*debian.Builder
	// missing is local.Config.Missing: why a built-in cannot be used yet.
	missing func(template string) error
}

// image answers templates.Config.Builtins.
func (b *builtinImages) image(name string) (v1.Hash, bool) {
	if name == local.DefaultTemplate {
		d, ok := b.base.pinned()
		if !ok && b.lazy {
			if img, err := b.store.Get(context.Background(), local.DefaultTemplate); err == nil {
				b.base.pin(img.Digest)
				return img.Digest, true
			}
		}
		return d, ok
	}
	if bl := b.builder[name]; bl != nil {
		return bl.Image()
	}
	return v1.Hash{}, false
}

// openImages opens the image store for the local provider. With
// DefaultImageDebian it makes sure the store has the Debian base as
// "default": found in a moment when cached, else built in the background
// (minutes, once per store), its progress logged; until then creating a
// sandbox from it is unavailable, unless the store had a `default` at
// start, which serves meanwhile. The built-ins' images are pinned: what
// the store had at start, or what the daemon built (builtinImages).
func openImages(ctx context.Context, cfg Config, log *slog.Logger) (*image.Store, *builtinImages, error) {
	dir := cfg.Images.Dir
	if dir == "" {
		dir = filepath.Join(cfg.DataDir, "images")
	}
	if cfg.Desktop.offered() {
		if err := cfg.Desktop.check(); err != nil {
			return nil, nil, err
		}
	}
	s, err := image.Open(dir, image.Config{Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("image store: %w", err)
	}
	switch cfg.Images.Default {
	case DefaultImageNone, DefaultImageDebian:
	default:
		return nil, nil, fmt.Errorf("--default-image %q (debian, none): %w", cfg.Images.Default, errdefs.ErrInvalidArgument)
	}
	b := &builtinImages{store: s, base: &baseBuild{phase: "starting"}, lazy: cfg.Images.Default == DefaultImageNone,
		builder: map[string]*debian.Builder{}}
	if img, err := s.Get(ctx, local.DefaultTemplate); err == nil {
		b.base.pin(img.Digest) // with debian: serves until the base below is ready
	}
	var missing []func(string) error
	if !b.lazy {
		missing = append(missing, b.base.missing)
	}
	// The code-interpreter template (R and Java besides the default's
	// kernels) is built when a sandbox first asks for it.
	ci := codeinterp.NewBuilder(ctx, s, log)
	b.builder[codeinterp.Template] = ci
	missing = append(missing, ci.Missing)
	if cfg.Desktop.offered() {
		d := desktop.NewBuilder(ctx, s, log)
		b.builder[desktop.Template] = d
		missing = append(missing, d.Missing)
		if !b.lazy && cfg.Desktop.Template == DesktopStart {
			d.Missing(desktop.Template) // starts the build unless the image is there
		}
	}
	b.missing = func(template string) error {
		for _, m := range missing {
			if err := m(template); err != nil {
				return err
			}
		}
		return nil
	}
	if b.lazy {
		return s, b, nil
	}
	go func() {
		start := time.Now()
		img, err := debian.Ensure(ctx, s, debian.Config{}, local.DefaultTemplate, func(p debian.Progress) {
			b.base.mu.Lock()
			b.base.phase = fmt.Sprintf("%d/%d %s", p.Step, p.Steps, p.Phase)
			b.base.mu.Unlock()
			log.Info("building the default template", slog.Int("step", p.Step), slog.Int("steps", p.Steps),
				slog.String("phase", p.Phase), slog.Duration(logkey.Elapsed, time.Since(start).Round(time.Second)))
		})
		if err == nil {
			b.base.pin(img.Digest)
		}
		b.base.mu.Lock()
		b.base.done, b.base.err = err == nil, err
		b.base.mu.Unlock()
		if err != nil {
			log.Error("default template unavailable", slog.String(logkey.Err, err.Error()))
			return
		}
		log.Info("default template ready", slog.String("image", img.Digest.String()), slog.Duration(logkey.Elapsed, time.Since(start).Round(time.Millisecond)))
	}()
	return s, b, nil
}
