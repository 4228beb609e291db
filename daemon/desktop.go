package daemon

import (
	"fmt"
	"log/slog"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// desktopManager returns the desktop tools' manager, or nil when the
// daemon offers no desktop template: none configured, or no image for it
// (the local provider's image store, or on Kubernetes the desktop's pod
// image named by --kube-images). When the front door serves sandbox ports
// (podPorts: the kubernetes provider's route to pods), a session gets
// public ports and no egress, and its live view is
// https://6080-<id>.<ports domain>/vnc.html (TLS in front of the
// listener, as for E2B's domain form).
func (c Config) desktopManager(m *contexts.Manager, tw *templateWire, podPorts bool, log *slog.Logger) *desktop.Manager {
	if !c.Desktop.offered() || ((tw == nil || tw.catalog == nil) && !c.kubeDesktop()) {
		return nil
	}
	dc := desktop.Config{Contexts: m, TTL: c.Desktop.TTL, StreamWait: c.Desktop.StreamWait, Logger: log}
	if net := c.desktopNetwork(podPorts); net != nil {
		domain := c.Network.Domain
		dc.Network = net
		dc.LiveURL = func(id string, port int) string { return fmt.Sprintf("https://%d-%s.%s", port, id, domain) }
	}
	return desktop.New(dc)
}

// kubeDesktop reports whether the kubernetes provider has a pod image for
// the desktop template: named by --kube-images, so the tools are not
// offered on a cluster whose registry may hold no desktop (its sessions
// would wait out the create timeout on an image that is not there).
func (c Config) kubeDesktop() bool {
	return c.uses("kubernetes") && c.Kubernetes.Images[desktop.Template] != ""
}

// desktopNetwork is a desktop's network when its create names none:
// public ports (the stream) and no egress, the same for the SDK's
// creates (api/e2bcompat) and the tools' sessions, so both take the
// same warm desktops; nil when the front door serves no sandbox ports
// (neither sandbox networks nor, podPorts, the route to pods).
func (c Config) desktopNetwork(podPorts bool) *policy.Policy {
	if !c.Network.Enabled && !podPorts {
		return nil
	}
	return &policy.Policy{Ingress: policy.Ingress{Public: true}}
}

// servesPorts reports whether the front door serves sandbox ports: the
// local provider's sandbox networks, or (podPorts) the kubernetes
// provider's pods. The E2B surface then answers the ports domain, so the
// SDKs' getHost names the front door, and desktops get their live view.
func (c Config) servesPorts(podPorts bool) bool { return c.Network.Enabled || podPorts }

// desktopPool is the desktop template's warm pool (started desktops),
// when the daemon offers it; a desktop created anew for a create the pool
// could have served is started the same way before the create returns.
func (c Config) desktopPool(mcfg *contexts.Config, tw *templateWire) {
	if !c.Desktop.offered() || tw == nil || tw.catalog == nil {
		return
	}
	mcfg.PoolSpecs = map[string]contexts.PoolSpec{
		desktop.Template: desktop.PoolSpec(desktop.DefaultPoolSize, desktop.Config{StreamWait: c.Desktop.StreamWait, Network: c.desktopNetwork(false), Logger: mcfg.Logger}),
	}
}

// check accepts the three modes.
func (f Desktop) check() error {
	switch f.Template {
	case DesktopFirstUse, DesktopStart, DesktopOff:
		return nil
	}
	return fmt.Errorf("--desktop-template %q (first-use, start, off): %w", f.Template, errdefs.ErrInvalidArgument)
}

// offered reports whether the desktop template is offered ("": a Config
// built in code, or mcp: not).
func (f Desktop) offered() bool { return f.Template != DesktopOff && f.Template != "" }
