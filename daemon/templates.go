package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/templates"
)

// templateWire holds the daemon's template catalog once the local
// provider has an image store, and the provider's answer to which images
// its sandboxes use (for GC).
type templateWire struct {
	store     templates.Store
	host      bool
	desktop   bool           // offer the built-in desktop template
	pullAllow []netip.Prefix // tenants' pulls may reach these besides the internet
	// defaultKernels are the default template's languages when the daemon
	// builds its image (templates.Config.DefaultKernels).
	defaultKernels []string
	log            *slog.Logger
	catalog        *templates.Catalog // nil until attach
	live           func(context.Context) ([]v1.Hash, error)
	builtins       *builtinImages // the built-ins' images and builds; nil until attach
}

// attach makes the catalog over the local provider's image store, with
// the built-in templates' images as builtins pins them (nil: the store's
// names, read once).
func (tw *templateWire) attach(imgs *image.Store, builtins *builtinImages) *templates.Catalog {
	tw.builtins = builtins
	cfg := templates.Config{Store: tw.store, Images: imgs, HostTemplate: tw.host, PullAllow: tw.pullAllow, Logger: tw.log,
		CodeInterpreter: true, DefaultKernels: tw.defaultKernels}
	if builtins != nil {
		cfg.Builtins = builtins.image
	}
	if ss, ok := tw.store.(templates.SnapshotStore); ok { // every store.Backend
		cfg.Snapshots = ss
	}
	if tw.desktop {
		cfg.Desktop = desktop.Settings()
	}
	tw.catalog = templates.New(cfg)
	return tw.catalog
}

// gcLoop runs the image GC every interval until ctx ends: it removes the
// layers and blobs no template, no named image and no sandbox (running or
// stopped) of this daemon uses. interval <= 0: never.
func (tw *templateWire) gcLoop(ctx context.Context, interval time.Duration) {
	if tw == nil || tw.catalog == nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		st, err := tw.catalog.GC(ctx, tw.live)
		if err != nil {
			if ctx.Err() == nil {
				tw.log.Warn("image gc", slog.String(logkey.Err, err.Error()))
			}
			continue
		}
		tw.log.Info("image gc", slog.Int("images_kept", st.Images), slog.Int("layers_removed", st.Layers),
			slog.Int("blobs_removed", st.Blobs), slog.Int64("freed_bytes", st.FreedBytes), slog.Duration(logkey.Elapsed, time.Since(start)))
	}
}
