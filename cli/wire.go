package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/mcp"
	"github.com/sandlot/sandlot/provider/chain"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
)

// wire assembles the daemon over the store: provider, guard, manager,
// tools and MCP. It starts the manager (reconcile, pools, cleanup); close
// detaches it, leaving sandboxes running for the next start.
func wire(ctx context.Context, cfg serveConfig, st store.Backend, log *slog.Logger) (*wired, error) {
	// Telemetry first: the guard, the provider chain and the manager
	// report to its metrics. The gauges read the manager once it exists.
	var m *contexts.Manager
	tel, err := telemetry.Setup(ctx, telemetry.Config{Stats: func() telemetry.Snapshot {
		if m == nil {
			return telemetry.Snapshot{}
		}
		return statsSnapshot(m.Stats())
	}})
	if err != nil {
		return nil, err
	}
	prov, provErr := newProvider(ctx, cfg, log, tel.Metrics)
	hmacKey, err := guardKey(cfg.store.dataDir)
	if err != nil {
		tel.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	g, err := guard.New(guard.Config{
		HMACKey: hmacKey,
		ModeFor: func(ctx context.Context, tenantID string) string {
			if t, ok := server.TenantFromContext(ctx); ok && t.ID == tenantID {
				return t.GuardMode
			}
			if t, err := st.GetTenant(ctx, tenantID); err == nil {
				return t.GuardMode
			}
			return tenant.GuardEnforce
		},
		OnFinding: tel.Metrics.GuardFinding,
		Audit: func(ctx context.Context, ev guard.Event) {
			_ = st.AppendAudit(context.WithoutCancel(ctx), store.AuditEvent{TenantID: ev.TenantID, Kind: audit.KindGuardFinding,
				Detail: map[string]string{"type": ev.Type, "mode": ev.Mode, "hmac": ev.HMAC,
					"start": strconv.Itoa(ev.Start), "end": strconv.Itoa(ev.End)}})
		},
	})
	if err != nil {
		tel.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	mcfg := contexts.Config{
		Metrics:                 tel.Metrics,
		Guard:                   g,
		Logger:                  log,
		MaxPerTenant:            cfg.maxPerTenant,
		MaxPerConversation:      cfg.maxPerConv,
		MaxExecutionsPerContext: cfg.maxExecutions,
		Limits:                  cfg.limits(),
		Node:                    cfg.node,
	}
	if cfg.poolSize >= 0 {
		mcfg.PoolSize = cfg.poolSize
		if cfg.poolSize == 0 {
			mcfg.PoolSize = -1
		}
	}
	m = contexts.NewManager(st, prov, mcfg)
	w := &wired{}
	if err := m.Start(ctx); err != nil {
		tel.Shutdown(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("start the context manager: %w", err)
	}
	reg := tools.New(m, tools.Config{Logger: log})
	mcpSrv := mcp.New(reg, mcp.Config{Logger: log})
	adm := server.NewAdmission(server.AdmissionConfig{MaxInFlight: cfg.maxInFlight, MaxInFlightPerTenant: cfg.maxInFlightPerTenant})
	e2bH, e2bMatch, err := e2bWire(cfg, m, st, adm.Tenant, log)
	if err == nil {
		w.metricsToken, err = metricsToken(cfg.store.dataDir)
	}
	if err != nil {
		m.Close(context.WithoutCancel(ctx))
		tel.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	rctx, stopReaper := context.WithCancel(context.WithoutCancel(ctx))
	reaper := &tenantReaper{st: st, m: m, log: log}
	reaped := make(chan struct{})
	go func() { defer close(reaped); reaper.run(rctx) }()
	*w = wired{
		metricsToken: w.metricsToken,
		admission:    adm,
		e2b:          e2bH,
		e2bMatch:     e2bMatch,
		contexts:     server.ManagerContexts{M: m},
		audit:        st.ListAudit,
		tools:        registryTools{reg},
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
		metrics: tel.Handler(),
		close: func(ctx context.Context) error {
			stopReaper()
			<-reaped
			return errors.Join(m.Close(ctx), tel.Shutdown(ctx))
		},
	}
	return w, nil
}

// newProvider builds the providers named by --providers, in fallback
// order (a chain when there are several). When none can be built (no
// runtime, no agent binary), sandboxes are unavailable: the server still
// starts, and /readyz and every tool call say why.
func newProvider(ctx context.Context, cfg serveConfig, log *slog.Logger, met *telemetry.Metrics) (contexts.Provider, error) {
	var ps []contexts.Provider
	var errs []error
	for _, name := range strings.Split(cfg.providers, ",") {
		switch name = strings.TrimSpace(name); name {
		case "local":
			lc := local.Config{
				Runtime:      runtimeName(cfg.runtime),
				StateDir:     cfg.stateDir,
				Limits:       cfg.limits(),
				HostTemplate: cfg.hostTemplate,
				Logger:       log,
			}
			if cfg.defaultImage != "" {
				s, missing, err := openImages(ctx, cfg, log)
				if err != nil {
					errs = append(errs, fmt.Errorf("provider local: %w", err))
					continue
				}
				lc.Images, lc.Missing = s, missing
			}
			p, err := local.New(lc)
			if err != nil {
				errs = append(errs, fmt.Errorf("provider local: %w", err))
				continue
			}
			log.Info("provider ready", slog.String("provider", name), slog.String("runtime", p.Runtime().Name()))
			ps = append(ps, p)
		case "e2b":
			ps = append(ps, e2bProvider(log, cfg.node))
		default:
			errs = append(errs, fmt.Errorf("provider %q is not built into this binary (local, e2b): %w", name, errdefs.ErrInvalidArgument))
		}
	}
	if len(ps) > 0 {
		for _, err := range errs {
			log.Warn("provider skipped", slog.String(keyErr, err.Error()))
		}
		var quota *chain.Quota
		if usesProvider(cfg.providers, "e2b") {
			q, err := e2bQuota(log, met.QuotaUsage)
			if err != nil {
				log.Warn("e2b quota tracking off", slog.String(keyErr, err.Error()))
			}
			quota = q
		}
		return providerChain(ps, log, func(from, _ string, err error) {
			met.ProviderFallback(from, string(errdefs.CodeOf(err)))
		}, quota), nil
	}
	err := fmt.Errorf("no usable sandbox provider: %v: %w", errors.Join(errs...), errdefs.ErrUnavailable)
	log.Error("no sandbox provider; tool calls answer 503", slog.String(keyErr, err.Error()))
	return noProvider{err}, err
}

const keyErr = "error"

// runtimeName maps --runtime to local.Config.Runtime ("" is auto).
func runtimeName(s string) string {
	if s == "auto" {
		return ""
	}
	return s
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

// statsSnapshot converts the manager's counters for the telemetry gauges.
func statsSnapshot(s contexts.Stats) telemetry.Snapshot {
	out := telemetry.Snapshot{Active: s.Active, PerPool: make(map[string]telemetry.PoolSnapshot, len(s.PerTemplate))}
	for name, t := range s.PerTemplate {
		out.PerPool[name] = telemetry.PoolSnapshot{Size: t.PoolSize, Hits: t.PoolHits, Misses: t.PoolMisses}
	}
	return out
}
