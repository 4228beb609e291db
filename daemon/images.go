package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

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
	case b.err != nil:
		return fmt.Errorf("the default template could not be built (%v): %w", b.err, errdefs.ErrFailedPrecondition)
	case !b.done:
		return errdefs.Public(fmt.Errorf("the default template is being built (%s); try again in a few minutes: %w", b.phase, errdefs.ErrUnavailable),
			fmt.Sprintf("The sandbox is still being prepared: the default template is being built (%s; minutes, on the first start only); retry in a minute.", b.phase))
	}
	return nil
}

// openImages opens the image store for the local provider. With
// DefaultImageDebian it makes sure the store has the Debian base as
// "default": found in a moment when cached, else built in the background
// (minutes, once per store), its progress logged; until then creating a
// sandbox from it is unavailable.
func openImages(ctx context.Context, cfg Config, log *slog.Logger) (*image.Store, func(string) error, error) {
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
	// The code-interpreter template (R and Java besides the default's
	// kernels) is built when a sandbox first asks for it.
	ci := codeinterp.NewBuilder(ctx, s, log)
	switch cfg.Images.Default {
	case DefaultImageNone:
		if cfg.Desktop.offered() {
			d := desktop.NewBuilder(ctx, s, log)
			return s, func(template string) error {
				if err := ci.Missing(template); err != nil {
					return err
				}
				return d.Missing(template)
			}, nil
		}
		return s, ci.Missing, nil
	case DefaultImageDebian:
	default:
		return nil, nil, fmt.Errorf("--default-image %q (debian, none): %w", cfg.Images.Default, errdefs.ErrInvalidArgument)
	}
	b := &baseBuild{phase: "starting"}
	missing := func(template string) error {
		if err := b.missing(template); err != nil {
			return err
		}
		return ci.Missing(template)
	}
	if cfg.Desktop.offered() {
		d := desktop.NewBuilder(ctx, s, log)
		if cfg.Desktop.Template == DesktopStart {
			d.Missing(desktop.Template) // starts the build unless the image is there
		}
		base := missing
		missing = func(template string) error {
			if err := base(template); err != nil {
				return err
			}
			return d.Missing(template)
		}
	}
	go func() {
		start := time.Now()
		img, err := debian.Ensure(ctx, s, debian.Config{}, local.DefaultTemplate, func(p debian.Progress) {
			b.mu.Lock()
			b.phase = fmt.Sprintf("%d/%d %s", p.Step, p.Steps, p.Phase)
			b.mu.Unlock()
			log.Info("building the default template", slog.Int("step", p.Step), slog.Int("steps", p.Steps),
				slog.String("phase", p.Phase), slog.Duration(logkey.Elapsed, time.Since(start).Round(time.Second)))
		})
		b.mu.Lock()
		b.done, b.err = err == nil, err
		b.mu.Unlock()
		if err != nil {
			log.Error("default template unavailable", slog.String(logkey.Err, err.Error()))
			return
		}
		log.Info("default template ready", slog.String("image", img.Digest.String()), slog.Duration(logkey.Elapsed, time.Since(start).Round(time.Millisecond)))
	}()
	return s, missing, nil
}
