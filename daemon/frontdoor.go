package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/mcp"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/templates/builds"
	"github.com/sandlot/sandlot/tenant"
)

// surfaces are the parts New built that only the front door serves.
type surfaces struct {
	st      store.Backend
	prov    contexts.Provider
	provErr error // why no provider could be built
	nw      *netWire
	tw      *templateWire
	builds  *builds.Queue // nil when builds are off
	metrics http.Handler  // the exporter's Prometheus exposition
}

// frontDoor is sandlot's HTTP front door: the /v1 routes, MCP over
// streamable HTTP at /mcp, the E2B wire (its own hosts and headers,
// matched before the routes), sandbox ports and /metrics behind its own
// token, with one authenticator and one admission limit for all of them.
type frontDoor struct {
	srv          *server.Server
	metricsToken string
}

// frontDoor composes the front door over what New built.
func (d *Daemon) frontDoor(p surfaces) (*frontDoor, error) {
	cfg := d.cfg
	// One admission limit for the server and the E2B handler, so one
	// tenant's in-flight limit covers every surface.
	admission := server.NewAdmission(server.AdmissionConfig{MaxInFlight: cfg.MaxInFlight, MaxInFlightPerTenant: cfg.MaxInFlightPerTenant})
	e2bH, e2bMatch, err := e2bWire(cfg, d.manager, p.tw.catalog, p.builds, d.auth, admission.Tenant, p.nw, d.log)
	if err != nil {
		return nil, err
	}
	metricsTok, err := metricsToken(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	mcpH := mcp.New(d.tools, mcp.Config{Logger: d.log, Tenants: d.auth}).HTTPHandler(func(r *http.Request) (string, error) {
		// Mounted behind the server's key check, which set the tenant.
		if id, ok := tenant.FromContext(r.Context()); ok {
			return id, nil
		}
		return "", fmt.Errorf("no tenant: %w", errdefs.ErrUnauthenticated)
	})
	scfg := server.Config{
		Contexts:        d.manager,
		Tools:           d.tools,
		Auth:            d.auth,
		Logger:          d.log,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Ready:           readiness(p.st, p.prov, p.provErr),
		MCP:             mcpH,
		E2B:             e2bH,
		E2BMatch:        e2bMatch,
		E2BError:        e2bcompat.WriteError,
		Metrics:         p.metrics,
		MetricsToken:    metricsTok,
		Admission:       admission,
		BodyReadTimeout: cfg.BodyReadTimeout,
		Audit:           p.st.ListAudit,
	}
	if ph := p.nw.portsRoute(); ph != nil {
		scfg.Ports, scfg.PortsMatch = ph, ph.Match
	}
	if p.nw != nil {
		// Tenants' secrets serve nothing without networks.
		scfg.Secrets, scfg.SecretsChanged = p.st, p.nw.secretsChanged
	}
	if p.tw.catalog != nil { // a nil *Catalog in the interface would not be nil
		scfg.Templates = p.tw.catalog
	}
	if p.builds != nil {
		scfg.Builds = p.builds
	}
	return &frontDoor{srv: server.New(scfg), metricsToken: metricsTok}, nil
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

func (f *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.srv.Handler().ServeHTTP(w, r)
}

func (f *frontDoor) serve(ctx context.Context, ln net.Listener) error { return f.srv.Serve(ctx, ln) }
