package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/codeinterp"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/provider/local"
)

// lazyDefault pins, with --default-image none, the image the store names
// `default` at its first use (the operator's).
type lazyDefault struct {
	mu    sync.Mutex
	image v1.Hash
	ready bool
}

// builtinImages are the built-in templates' images as this daemon found
// them at start or built them since (templates.Config.Builtins): a
// built-in never follows a name in the image store, which everything
// that writes the store reaches. With --default-image debian the default
// template is built in stages (debian.DefaultStages: a core, then the
// full image), each serving from when it is ready; with none, an
// operator's `default` the store did not have at start is read at its
// first use.
type builtinImages struct {
	store *image.Store
	base  *debian.Builder // the default template's (debian); nil with none
	lazy  *lazyDefault    // the default template's with none
	// builder are the other built-ins' (desktop, code-interpreter).
	builder map[string]*debian.Builder
	// missing is local.Config.Missing: why a built-in cannot be used yet.
	missing func(template string) error
}

// image answers templates.Config.Builtins.
func (b *builtinImages) image(name string) (v1.Hash, bool) {
	if name == local.DefaultTemplate {
		if b.base != nil {
			return b.base.Image()
		}
		l := b.lazy
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.ready {
			if img, err := b.store.Get(context.Background(), local.DefaultTemplate); err == nil {
				l.image, l.ready = img.Digest, true
			}
		}
		return l.image, l.ready
	}
	if bl := b.builder[name]; bl != nil {
		return bl.Image()
	}
	return v1.Hash{}, false
}

// onServe tells fn the name of each built-in template whose builder makes
// a new image its own (the default's full image replacing its core, a
// desktop built on first use): the manager refreshes that template's warm
// pool.
func (b *builtinImages) onServe(fn func(template string)) {
	if b == nil {
		return
	}
	if b.base != nil {
		b.base.OnServe(func(v1.Hash) { fn(local.DefaultTemplate) })
	}
	for name, bl := range b.builder {
		bl.OnServe(func(v1.Hash) { fn(name) })
	}
}

// statuses are the built-ins' builders' states, the default's first (none
// with --default-image none, whose default the daemon does not build).
func (b *builtinImages) statuses() []debian.Status {
	if b == nil {
		return nil
	}
	var out []debian.Status
	if b.base != nil {
		out = append(out, b.base.Status())
	}
	for _, name := range slices.Sorted(maps.Keys(b.builder)) {
		out = append(out, b.builder[name].Status())
	}
	return out
}

// openImages opens the image store for the local provider. With
// DefaultImageDebian it makes sure the store has the Debian base as
// "default": found in a moment when cached, else built in the background
// in two stages (minutes, once per store; the core first, in about a
// third of the time, then the full image), its progress logged; until
// the first is ready creating a sandbox from it is unavailable, unless
// the store had a `default` at start, which serves meanwhile. The
// built-ins' images are pinned: what the store had at start, or what the
// daemon built (builtinImages).
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
	b := &builtinImages{store: s, builder: map[string]*debian.Builder{}}
	var missing []func(string) error
	if cfg.Images.Default == DefaultImageNone {
		b.lazy = &lazyDefault{}
		if img, err := s.Get(ctx, local.DefaultTemplate); err == nil {
			b.lazy.image, b.lazy.ready = img.Digest, true
		}
	} else {
		// Served at once when cached; else its stages build in the
		// background, each serving from when it is ready.
		b.base = debian.NewStaged(ctx, s, local.DefaultTemplate, debian.DefaultStages(), log)
		missing = append(missing, func(t string) error {
			if t == "" {
				t = local.DefaultTemplate
			}
			return b.base.Missing(t)
		})
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
		if b.base != nil && cfg.Desktop.Template == DesktopStart {
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
	return s, b, nil
}
