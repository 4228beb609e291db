package cli

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/mcp"
	"github.com/sandlot/sandlot/tenant"
)

// frontDoor composes sandlot's HTTP front door over what wire assembled,
// in this one place: the /v1 routes, MCP over streamable HTTP at /mcp,
// the E2B wire (its own hosts and headers, matched before the routes) and
// /metrics behind its own token, with one authenticator and one admission
// limit for all of them. serve, the bench and the tests' in-process
// daemon all listen with the server it returns; `sandlot mcp` speaks MCP
// on stdio and has no front door, so it neither creates the E2B secret nor
// the metrics token.
func frontDoor(cfg serveConfig, w *wired, log *slog.Logger) (srv *server.Server, metricsTok string, err error) {
	e2bH, e2bMatch, err := e2bWire(cfg, w.manager, w.templates, w.builds, w.auth, w.admission.Tenant, w.nw, log)
	if err != nil {
		return nil, "", err
	}
	metricsTok, err = metricsToken(cfg.store.dataDir)
	if err != nil {
		return nil, "", err
	}
	mcpH := mcp.New(w.tools, mcp.Config{Logger: log, Tenants: w.auth}).HTTPHandler(func(r *http.Request) (string, error) {
		// Mounted behind the server's key check, which set the tenant.
		if id, ok := tenant.FromContext(r.Context()); ok {
			return id, nil
		}
		return "", fmt.Errorf("no tenant: %w", errdefs.ErrUnauthenticated)
	})
	return server.New(server.Config{
		Contexts:        w.manager,
		Tools:           w.tools,
		Auth:            w.auth,
		Logger:          log,
		ShutdownTimeout: cfg.shutdownTimeout,
		Ready:           w.ready,
		MCP:             mcpH,
		E2B:             e2bH,
		E2BMatch:        e2bMatch,
		E2BError:        e2bcompat.WriteError,
		Metrics:         w.metrics,
		MetricsToken:    metricsTok,
		Admission:       w.admission,
		BodyReadTimeout: cfg.bodyReadTimeout,
		Audit:           w.audit,
		GuardText:       w.guardText,
		Ports:           w.portsHandler(),
		PortsMatch:      w.portsMatch(),
		Secrets:         w.secrets,
		SecretsChanged:  w.secretsChanged,
		Templates:       w.templateRoutes(),
		Builds:          w.buildRoutes(),
	}), metricsTok, nil
}
