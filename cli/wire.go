package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/mcp"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
)

// wire assembles the daemon over the store: provider, guard, manager,
// tools and MCP. It starts the manager (reconcile, pools, cleanup); close
// detaches it, leaving sandboxes running for the next start.
func wire(ctx context.Context, cfg serveConfig, st store.Backend, log *slog.Logger) (*wired, error) {
	prov, provErr := newProvider(ctx, cfg, log)
	g, err := guard.New(guard.Config{
		ModeFor: func(ctx context.Context, tenantID string) string {
			if t, ok := server.TenantFromContext(ctx); ok && t.ID == tenantID {
				return t.GuardMode
			}
			if t, err := st.GetTenant(ctx, tenantID); err == nil {
				return t.GuardMode
			}
			return tenant.GuardEnforce
		},
		Audit: func(ctx context.Context, ev guard.Event) {
			_ = st.AppendAudit(context.WithoutCancel(ctx), store.AuditEvent{TenantID: ev.TenantID, Kind: audit.KindGuardFinding,
				Detail: map[string]string{"type": ev.Type, "mode": ev.Mode, "hmac": ev.HMAC}})
		},
	})
	if err != nil {
		return nil, err
	}
	mcfg := contexts.Config{
		Guard:              g,
		Logger:             log,
		MaxPerTenant:       cfg.maxPerTenant,
		MaxPerConversation: cfg.maxPerConv,
		Limits:             contexts.Limits{MemoryBytes: cfg.memoryMiB << 20},
	}
	if cfg.poolSize >= 0 {
		mcfg.PoolSize = cfg.poolSize
		if cfg.poolSize == 0 {
			mcfg.PoolSize = -1
		}
	}
	m := contexts.NewManager(st, prov, mcfg)
	if err := m.Start(ctx); err != nil {
		return nil, fmt.Errorf("start the context manager: %w", err)
	}
	reg := tools.New(m, tools.Config{Logger: log})
	mcpSrv := mcp.New(reg, mcp.Config{Logger: log})
	w := &wired{
		contexts: managerContexts{m},
		tools:    registryTools{reg},
		ready: map[string]server.Check{
			"store": storeCheck(st),
			"runtime": func(ctx context.Context) error {
				if provErr != nil {
					return provErr
				}
				_, err := prov.List(ctx)
				return err
			},
		},
		mcp: mcpSrv.HTTPHandler(func(r *http.Request) (string, error) {
			// Mounted behind the server's key check, which set the tenant.
			if id, ok := tenant.FromContext(r.Context()); ok {
				return id, nil
			}
			return "", fmt.Errorf("no tenant: %w", errdefs.ErrUnauthenticated)
		}),
		close: m.Close,
	}
	return w, nil
}

// newProvider builds the providers named by --providers. Until a provider
// is built into this binary, sandboxes are unavailable and /readyz says so.
func newProvider(ctx context.Context, cfg serveConfig, log *slog.Logger) (contexts.Provider, error) {
	names := strings.Split(cfg.providers, ",")
	err := fmt.Errorf("provider %q is not built into this binary: %w", cfg.providers, errdefs.ErrUnavailable)
	log.Warn("no sandbox provider; tool calls answer 503", slog.String("providers", strings.Join(names, ",")))
	return noProvider{err}, err
}

// noProvider fails every sandbox operation with its error.
type noProvider struct{ err error }

func (p noProvider) Name() string { return "none" }
func (p noProvider) Create(context.Context, contexts.Spec) (contexts.Sandbox, error) {
	return nil, p.err
}
func (p noProvider) Attach(context.Context, string) (contexts.Sandbox, error) { return nil, p.err }
func (p noProvider) List(context.Context) ([]string, error)                   { return nil, p.err }
func (p noProvider) Destroy(context.Context, string) error                    { return nil }

// managerContexts adapts *contexts.Manager to server.Contexts.
type managerContexts struct{ m *contexts.Manager }

var _ server.Contexts = managerContexts{}

func (a managerContexts) Get(ctx context.Context, tenantID, id string) (*contexts.Record, error) {
	return a.m.Get(ctx, tenantID, id)
}
func (a managerContexts) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	return a.m.List(ctx, f)
}
func (a managerContexts) Terminate(ctx context.Context, tenantID, id string, r contexts.Reason) error {
	return a.m.Terminate(ctx, tenantID, id, r)
}
func (a managerContexts) PathEvent(ctx context.Context, id contexts.Identity, ev api.PathEvent) error {
	return a.m.PathEvent(ctx, id, contexts.PathEvent{Type: ev.Type, SourcePathID: ev.SourcePathID, TargetPathID: ev.TargetPathID})
}
func (a managerContexts) Use(ctx context.Context, id contexts.Identity, fn func(context.Context, *contexts.Record, contexts.Sandbox) error) error {
	return a.m.Use(ctx, id, contexts.CreateOptions{}, fn)
}
func (a managerContexts) Stats() api.SessionMetrics {
	s := a.m.Stats()
	out := api.SessionMetrics{
		SessionStats: api.SessionStats{ActiveSessions: s.Active, TotalCreated: s.TotalCreated, TotalReused: s.TotalReused,
			TotalCleaned: s.TotalCleaned, HealthCheckFailures: s.HealthCheckFailures},
		PoolSize: s.PoolSize, PoolHits: s.PoolHits, PoolMisses: s.PoolMisses,
		PerTemplate: map[string]api.SessionStats{},
	}
	for name, t := range s.PerTemplate {
		out.PerTemplate[name] = api.SessionStats{ActiveSessions: t.Active, TotalCreated: t.TotalCreated, TotalReused: t.TotalReused,
			TotalCleaned: t.TotalCleaned, HealthCheckFailures: t.HealthCheckFailures}
	}
	return out
}

// registryTools adapts *tools.Registry to server.Tools.
type registryTools struct{ r *tools.Registry }

var _ server.Tools = registryTools{}

func (a registryTools) Call(ctx context.Context, c server.ToolCall, out contexts.OutputFunc) (any, error) {
	return a.r.Call(ctx, tools.Call{Name: c.Name, Identity: c.Identity, Args: c.Args, Forced: c.Forced}, out)
}
func (a registryTools) Export(format string) (any, error) {
	if format == "" {
		return a.r.Tools(), nil
	}
	return a.r.Export(format)
}
