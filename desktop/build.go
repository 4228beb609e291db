package desktop

import (
	"context"
	"log/slog"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
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

// Builder makes sure the store has the desktop image, named Template,
// building it from Debian's mirror the first time it is asked for.
type Builder = debian.Builder

// NewBuilder returns the desktop image's builder over store
// (debian.NewBuilder).
func NewBuilder(ctx context.Context, store *image.Store, log *slog.Logger) *Builder {
	return newBuilder(ctx, store, log, ImageConfig())
}

func newBuilder(ctx context.Context, store *image.Store, log *slog.Logger, cfg debian.Config) *Builder {
	return debian.NewBuilder(ctx, store, Template, cfg, log)
}
