package cli

import (
	"fmt"
	"log/slog"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// The desktop template's modes (--desktop-template).
const (
	desktopFirstUse = "first-use" // built from Debian's mirror when first asked for, cached
	desktopStart    = "start"     // built at the daemon's start when not cached
	desktopOff      = "off"       // not offered
)

// desktopFlags configure desktop sandboxes (docs/desktop.md).
type desktopFlags struct {
	template   string
	ttl        time.Duration
	streamWait time.Duration
}

func (f *desktopFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.template, "desktop-template", desktopFirstUse,
		"the built-in \"desktop\" template (Xvfb, XFCE, Chromium, noVNC): first-use (built from the Debian mirror when first asked for, cached), start (built at start), off")
	fs.DurationVar(&f.ttl, "desktop-ttl", desktop.DefaultTTL, "a desktop session (the desktop tools') ends this long after its last call")
	fs.DurationVar(&f.streamWait, "desktop-stream-wait", desktop.DefaultStreamWait, "how long opening a desktop session waits for its live view's stream")
}

// desktopManager returns the desktop tools' manager, or nil when the
// daemon offers no desktop template (or has no image store for it). With
// sandbox networks, a session gets public ports and no egress, and its
// live view is https://6080-<id>.<ports domain>/vnc.html (TLS in front
// of the listener, as for E2B's domain form).
func (c serveConfig) desktopManager(m *contexts.Manager, tw *templateWire, log *slog.Logger) *desktop.Manager {
	if !c.desktop.offered() || tw == nil || tw.catalog == nil {
		return nil
	}
	dc := desktop.Config{Contexts: m, TTL: c.desktop.ttl, StreamWait: c.desktop.streamWait, Logger: log}
	if c.network.enabled {
		domain := c.network.domain
		dc.Network = c.desktopNetwork()
		dc.LiveURL = func(id string, port int) string { return fmt.Sprintf("https://%d-%s.%s", port, id, domain) }
	}
	return desktop.New(dc)
}

// desktopNetwork is a desktop's network when its create names none:
// public ports (the stream) and no egress, the same for the SDK's
// creates (api/e2bcompat) and the tools' sessions, so both take the
// same warm desktops; nil without sandbox networks.
func (c serveConfig) desktopNetwork() *policy.Policy {
	if !c.network.enabled {
		return nil
	}
	return &policy.Policy{Ingress: policy.Ingress{Public: true}}
}

// desktopPool is the desktop template's warm pool (started desktops),
// when the daemon offers it.
func (c serveConfig) desktopPool(mcfg *contexts.Config, tw *templateWire) {
	if !c.desktop.offered() || tw == nil || tw.catalog == nil {
		return
	}
	mcfg.PoolSpecs = map[string]contexts.PoolSpec{
		desktop.Template: desktop.PoolSpec(desktop.DefaultPoolSize, desktop.DefaultWidth, desktop.DefaultHeight, c.desktopNetwork()),
	}
}

func (f desktopFlags) check() error {
	switch f.template {
	case desktopFirstUse, desktopStart, desktopOff:
		return nil
	}
	return fmt.Errorf("--desktop-template %q (first-use, start, off): %w", f.template, errdefs.ErrInvalidArgument)
}

// offered reports whether the desktop template is offered ("": a
// serveConfig built in code, or mcp: not).
func (f desktopFlags) offered() bool { return f.template != desktopOff && f.template != "" }
