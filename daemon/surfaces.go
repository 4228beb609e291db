package daemon

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/console"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/mcp"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/templates/builds"
	"github.com/sandlot/sandlot/tenant"
)

// parts are what New built that only the front door serves.
type parts struct {
	st      store.Backend
	prov    contexts.Provider
	provErr error // why no provider could be built
	nw      *netWire
	tw      *templateWire
	builds  *builds.Queue // nil when builds are off
	metrics http.Handler  // the exporter's Prometheus exposition
}

// surfaces composes what the front door serves over what New built: the
// /v1 API, MCP, the E2B wire, sandbox ports and /metrics, with one
// authenticator and one admission limit for all of them. It makes the E2B
// secret and the metrics token on first start.
func (d *Daemon) surfaces(p parts) (frontConfig, error) {
	cfg := d.cfg
	adm := newAdmission(cfg.MaxInFlight, cfg.MaxInFlightPerTenant)
	e2bH, err := e2bWire(cfg, d.manager, p.tw.catalog, p.builds, d.auth, adm.tenant, p.nw, d.kegress.servesPorts(), d.vols, d.log)
	if err != nil {
		return frontConfig{}, err
	}
	metricsTok, err := metricsToken(cfg.DataDir)
	if err != nil {
		return frontConfig{}, err
	}
	v1 := server.Config{
		Contexts: d.manager,
		Live:     d.manager,
		Tools:    d.tools,
		Auth:     d.auth,
		Keys:     p.st,
		AuditAdd: d.trail.Add,
		Usage:    d.usage(p.st, p.tw.catalog, adm),
		Logger:   d.log,
		Ready:    readiness(p.st, p.prov, p.provErr),
		Audit:    p.st.ListAuditKind,
		Version:  d.buildVersion(),
		// What a sandbox chose outside its output (the names in its audit
		// events) reaches a caller through the guard, as its context's.
		GuardText: func(ctx context.Context, tenantID, contextID, text string) string {
			return d.guard.Text(d.manager.Masked(ctx, contextID), tenantID, text)
		},
	}
	if p.nw != nil {
		// Tenants' secrets serve nothing without networks.
		v1.Secrets, v1.SecretsChanged = p.st, p.nw.secretsChanged
	} else if d.kegress.serving() {
		// The pods' proxy reads a sandbox's secrets at each connection:
		// a change holds at the next one; the guard forgets the old values.
		v1.Secrets, v1.SecretsChanged = p.st, d.guard.Forget
	}
	if p.tw.catalog != nil { // a nil *Catalog in the interface would not be nil
		v1.Templates = p.tw.catalog
		v1.Snapshots, v1.Capture = p.tw.catalog, d.capture
	}
	v1.Progress = func(r *api.Readiness) {
		if p.tw.builtins != nil {
			p.tw.builtins.progress(r)
		}
		guardHealth(d.guard, r)
	}
	if p.builds != nil {
		v1.Builds = p.builds
	}
	if d.vols != nil {
		v1.Volumes = d.vols
	}
	fc := frontConfig{
		V1: v1,
		MCP: mcp.New(d.tools, mcp.Config{Logger: d.log, Tenants: d.auth, Version: d.version()}).HTTPHandler(func(r *http.Request) (string, error) {
			// Mounted behind /v1's key check, which set the tenant.
			if id, ok := tenant.FromContext(r.Context()); ok {
				return id, nil
			}
			return "", fmt.Errorf("no tenant: %w", errdefs.ErrUnauthenticated)
		}),
		E2B:             e2bH,
		E2BError:        e2bcompat.WriteError,
		Metrics:         p.metrics,
		MetricsToken:    metricsTok,
		Admission:       adm,
		BodyReadTimeout: cfg.BodyReadTimeout,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Logger:          d.log,
		Version:         d.version(),
		Console:         console.New(),
	}
	if d.liveViews {
		// Desktops' live views are pages of the ports domain
		// (desktopManager's LiveURL): the context page frames them.
		c, err := console.New().WithLiveViews(cfg.Network.Domain)
		if err != nil {
			return frontConfig{}, err
		}
		fc.Console = c
	}
	if ph := p.nw.portsRoute(); ph != nil {
		fc.Ports = ph
	} else if d.kegress.servesPorts() {
		if e2bH != nil {
			d.kegress.verify = e2bH.VerifyTrafficToken
		}
		ph, err := d.kegress.portsRoute(cfg.Network.Domain, cfg.Network.PortsTimeout, &portsGuard{g: d.guard, m: d.manager}, d.log)
		if err != nil {
			return frontConfig{}, err
		}
		fc.Ports = ph
	}
	return fc, nil
}

// readiness are the probes of /readyz: the store answers a cheap read,
// and the providers list their sandboxes.
func readiness(st store.Backend, prov contexts.Provider, provErr error) map[string]server.Check {
	return map[string]server.Check{
		"store": func(ctx context.Context) error {
			_, err := st.ListTenants(ctx)
			return err
		},
		"runtime": func(ctx context.Context) error {
			if provErr != nil {
				return provErr
			}
			_, err := prov.List(ctx)
			return err
		},
	}
}
