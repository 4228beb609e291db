package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/provider/chain"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/telemetry/export"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
)

// wire assembles the daemon over the store: exporters, provider, guard,
// manager, tools, the authenticator and the admission limit; frontDoor puts
// HTTP in front of them, `sandlot mcp` stdio. It starts the manager
// (reconcile, pools, cleanup); close detaches it, leaving sandboxes
// running for the next start.
func wire(ctx context.Context, cfg serveConfig, st store.Backend, log *slog.Logger) (*wired, error) {
	// Exporters first: the guard, the provider chain and the manager make
	// their instruments from the global meter this installs.
	if err := telemetry.SetPrefixes(cfg.metricPrefix, cfg.spanPrefix); err != nil {
		return nil, err
	}
	tel, err := export.Setup(ctx, export.Config{})
	if err != nil {
		return nil, err
	}
	// One authenticator, so /v1, MCP, E2B and the guard share one cache.
	auth := tenant.NewAuthenticator(st, tenant.AuthConfig{})
	// What sandboxes cause to be audited (connections, lookups, findings)
	// reaches the store through one writer: fair across tenants, batched.
	trail := audit.NewWriter(st, audit.WriterConfig{Log: log})
	wiredOK := false
	defer func() {
		if !wiredOK {
			trail.Close(context.WithoutCancel(ctx))
		}
	}()
	nw, err := newNetworks(cfg, st, trail, log)
	if err != nil {
		tel.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	tw := &templateWire{store: st, host: cfg.hostTemplate, desktop: cfg.desktop.offered(), pullAllow: cfg.build.pullAllow, log: log}
	prov, provErr := newProvider(ctx, cfg, log, nw, tw)
	if nw != nil && nw.startErr != nil {
		nw.close(context.WithoutCancel(ctx))
		tel.Shutdown(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("sandbox networks: %w", nw.startErr)
	}
	hmacKey, err := guardKey(cfg.store.dataDir)
	if err != nil {
		tel.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	var known func(ctx context.Context, tenantID string) ([]string, error)
	if nw != nil {
		// Tenants' stored secret values are masked in all output, with
		// their encodings, by the guard itself.
		known = knownValues(st)
	}
	g, err := guard.New(guard.Config{
		HMACKey: hmacKey,
		Known:   known,
		// Requests carry their tenant, whose mode the guard reads; this is
		// for work outside a request (cleanup, reconcile).
		ModeFor: func(ctx context.Context, tenantID string) string {
			if t, err := auth.Tenant(ctx, tenantID); err == nil {
				return t.GuardMode
			}
			return tenant.GuardEnforce
		},
		Audit: func(ctx context.Context, ev guard.Event) {
			trail.Add(store.AuditEvent{TenantID: ev.TenantID, Kind: audit.KindGuardFinding, At: time.Now(),
				Detail: map[string]string{"type": ev.Type, "mode": ev.Mode, "hmac": ev.HMAC,
					"start": strconv.Itoa(ev.Start), "end": strconv.Itoa(ev.End)}})
		},
	})
	if err != nil {
		tel.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	if nw != nil {
		nw.forget = g.Forget
	}
	mcfg := cfg.managerConfig()
	mcfg.Guard, mcfg.Logger = g, log
	mcfg.OnTerminated = func(ctx context.Context, ev contexts.Termination) {
		_ = st.AppendAudit(ctx, store.AuditEvent{TenantID: ev.TenantID, Kind: audit.KindContextTerminated,
			Detail: map[string]string{"context": ev.ContextID, "sandbox": ev.SandboxID, "template": ev.Template,
				"reason": string(ev.Reason), "error": ev.LastError}})
	}
	if nw != nil {
		mcfg.Networks = nw.st
	} else {
		op, err := cfg.network.operator()
		if err != nil {
			tel.Shutdown(context.WithoutCancel(ctx))
			return nil, err
		}
		mcfg.Networks = policyOnly{op}
	}
	if tw.catalog != nil {
		mcfg.Catalog = tw.catalog
	}
	cfg.desktopPool(&mcfg, tw)
	m := contexts.NewManager(st, prov, mcfg)
	if nw != nil {
		nw.guard.g, nw.guard.m = g, m
	}
	if err := m.Start(ctx); err != nil {
		nw.close(context.WithoutCancel(ctx))
		tel.Shutdown(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("start the context manager: %w", err)
	}
	tcfg := tools.Config{MaxCodeBytes: mcfg.MaxCodeBytes, Logger: log, Unavailable: provErr}
	if dm := cfg.desktopManager(m, tw, log); dm != nil {
		tcfg.Desktop = dm
	}
	reg := tools.New(m, tcfg)
	rctx, stopReaper := context.WithCancel(context.WithoutCancel(ctx))
	reaper := &tenantReaper{st: st, m: m, log: log}
	reaped := make(chan struct{})
	go func() { defer close(reaped); reaper.run(rctx) }()
	gcDone := make(chan struct{})
	go func() { defer close(gcDone); tw.gcLoop(rctx, cfg.imageGCInterval) }()
	w := &wired{
		nw:    nw,
		ports: nw.portsRoute(),
		auth:  auth,
		admission: server.NewAdmission(server.AdmissionConfig{
			MaxInFlight: cfg.maxInFlight, MaxInFlightPerTenant: cfg.maxInFlightPerTenant}),
		manager: m,
		audit:   st.ListAudit,
		guardText: func(ctx context.Context, tenantID, contextID, text string) string {
			return g.Text(m.Masked(ctx, contextID), tenantID, text)
		},
		tools: reg,
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
		metrics: tel.Handler(),
		close: func(ctx context.Context) error {
			stopReaper()
			<-reaped
			<-gcDone
			// The networks outlive the daemon with their sandboxes; only
			// the proxy and the resolver stop. The trail last: it writes
			// what they sent.
			err := errors.Join(m.Close(ctx), nw.close(ctx))
			return errors.Join(err, trail.Close(ctx), tel.Shutdown(ctx))
		},
	}
	if nw != nil {
		w.secrets, w.secretsChanged = st, nw.secretsChanged
	}
	if tw.catalog != nil {
		w.templates = tw.catalog
	}
	wiredOK = true // w.close closes the trail from here on
	if w.builds, err = buildQueue(cfg, prov, tw.catalog, g, log); err != nil {
		w.close(context.WithoutCancel(ctx))
		return nil, err
	}
	return w, nil
}

// managerConfig is the manager's configuration from the flags, without
// the parts wire builds (guard, logger, networks).
func (c serveConfig) managerConfig() contexts.Config {
	mcfg := contexts.Config{
		TTL:                     c.contextTTL,
		CleanupInterval:         c.cleanupInterval,
		DefaultTimeout:          c.execTimeout,
		MaxTimeout:              c.maxExecTimeout,
		MaxPerTenant:            c.maxPerTenant,
		MaxPerConversation:      c.maxPerConv,
		MaxExecutionsPerContext: c.maxExecutions,
		Limits:                  c.limits(),
		Node:                    c.node,
	}
	if mcfg.AuditRetention = c.auditRetention; c.auditRetention == 0 {
		mcfg.AuditRetention = -1 // the flag's 0 keeps audit events forever
	}
	if c.poolSize >= 0 {
		mcfg.PoolSize = c.poolSize
		if c.poolSize == 0 {
			mcfg.PoolSize = -1
		}
	}
	if len(c.poolSizes) > 0 {
		mcfg.PoolSizes = map[string]int(c.poolSizes)
	}
	return mcfg
}

// localConfig is the local provider's configuration from the flags,
// without its images and networks.
func (c serveConfig) localConfig(log *slog.Logger) local.Config {
	return local.Config{
		Runtime:      runtimeName(c.runtime),
		StateDir:     c.stateDir,
		Limits:       c.limits(),
		HostTemplate: c.hostTemplate,
		ReadyTimeout: c.createTimeout,
		MaxCreating:  c.maxCreating,
		Logger:       log,
	}
}

// newProvider builds the providers named by --providers, in fallback
// order (a chain when there are several). When none can be built (no
// runtime, no agent binary), sandboxes are unavailable: the server still
// starts, and /readyz and every tool call say why.
func newProvider(ctx context.Context, cfg serveConfig, log *slog.Logger, nw *netWire, tw *templateWire) (contexts.Provider, error) {
	var ps []contexts.Provider
	var errs []error
	for _, name := range strings.Split(cfg.providers, ",") {
		switch name = strings.TrimSpace(name); name {
		case "local":
			lc := cfg.localConfig(log)
			if cfg.defaultImage != "" {
				s, missing, err := openImages(ctx, cfg, log)
				if err != nil {
					errs = append(errs, fmt.Errorf("provider local: %w", err))
					continue
				}
				lc.Images, lc.Missing = s, missing
				if tw != nil {
					lc.Templates = tw.attach(s)
				}
			}
			if nw != nil {
				lc.Networks = nw.st
			}
			p, err := local.New(lc)
			if err != nil {
				errs = append(errs, fmt.Errorf("provider local: %w", err))
				continue
			}
			if nw != nil {
				// The networks of sandboxes still running are taken over;
				// the others are removed.
				ids, err := p.List(ctx)
				if err == nil {
					err = nw.start(ctx, ids)
				}
				if err != nil {
					nw.startErr = err
					return nil, err
				}
			}
			if tw != nil && lc.Images != nil {
				tw.live = p.LiveImages
			}
			log.Info("provider ready", slog.String(logkey.Provider, name), slog.String(logkey.Runtime, p.Runtime().Name()))
			ps = append(ps, p)
		case "e2b":
			p, err := e2bProvider(log, cfg.node, cfg.e2b)
			if err != nil {
				return nil, err
			}
			ps = append(ps, p)
		default:
			errs = append(errs, fmt.Errorf("provider %q is not built into this binary (local, e2b): %w", name, errdefs.ErrInvalidArgument))
		}
	}
	if len(ps) > 0 {
		for _, err := range errs {
			log.Warn("provider skipped", slog.String(logkey.Err, err.Error()))
		}
		var quota *chain.Quota
		if usesProvider(cfg.providers, "e2b") {
			q, err := e2bQuota(log, filepath.Join(cfg.store.dataDir, e2bQuotaFile), cfg.e2b)
			if err != nil {
				log.Warn("e2b quota tracking off", slog.String(logkey.Err, err.Error()))
			}
			quota = q
		}
		return providerChain(ps, log, quota), nil
	}
	err := fmt.Errorf("no usable sandbox provider: %v: %w", errors.Join(errs...), errdefs.ErrUnavailable)
	log.Error("no sandbox provider; tool calls answer 503", slog.String(logkey.Err, err.Error()))
	return noProvider{err}, err
}

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
