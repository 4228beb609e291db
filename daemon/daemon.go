// Package daemon is sandlot's composition root: from a typed Config and an
// open store, New builds the daemon (exporters, providers, guard, context
// manager, tools, networks, templates and builds, the tenant reaper) and
// its one HTTP front door, which dispatches every surface in one place:
// sandbox ports, the E2B wire, MCP at /mcp, /metrics and the /v1 API. The
// CLI (`sandlot serve`, `sandlot mcp`), the bench and the tests build the
// daemon here; nothing else imports this package.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/network/ports"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/telemetry/export"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
	"github.com/sandlot/sandlot/volumes"
)

// Daemon is one running sandlot daemon. Its methods are safe for
// concurrent use.
type Daemon struct {
	cfg Config // Node resolved
	log *slog.Logger

	manager *contexts.Manager
	guard   *guard.Guard
	tools   *tools.Registry
	// auth is shared by /v1, MCP, the E2B wire and the guard: one key
	// and tenant cache.
	auth *tenant.Authenticator
	// front is the HTTP front door; nil with Config.Stdio.
	front *frontDoor
	// liveViews: desktop sessions have live views (pages of the ports
	// domain), which the console frames.
	liveViews bool

	// What Close releases, each nil until New has built it.
	unlock    func()            // the state dir's lock
	tel       *export.Telemetry // the exporters
	nw        *netWire          // sandbox networks (nil-safe)
	kegress   *kubeEgress       // sandbox pods' egress proxy (nil-safe)
	vols      *volumes.Service  // tenants' volumes; nil when off (volumes.go)
	trail     *audit.Writer     // the audit trail's writer
	stopLoops func()            // the tenant reaper and the image GC
	loopsDone []chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// New builds the daemon over st, which the caller opened and closes after
// Close. It takes the state dir (LockStateDir) when it runs the local
// provider, resolves its node, installs the exporters and starts the
// manager (reconcile, pools, cleanup). When no provider can be built (no
// runtime, no agent binary) it still starts: /readyz and every tool call
// say why.
func New(ctx context.Context, cfg Config, st store.Backend) (_ *Daemon, err error) {
	d := &Daemon{log: cfg.Logger}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	log := d.log
	defer func() {
		if err != nil {
			d.Close(context.WithoutCancel(ctx))
		}
	}()
	if cfg.uses("local") {
		if d.unlock, err = LockStateDir(cfg.StateDir); err != nil {
			return nil, err
		}
	}
	if cfg.Node, err = resolveNode(cfg.Node, cfg.DataDir, cfg.StateDir); err != nil {
		return nil, err
	}
	if cfg.Network.Domain == "" {
		cfg.Network.Domain = ports.DefaultDomain
	}
	d.cfg = cfg

	// Exporters first: the guard, the provider chain and the manager make
	// their instruments from the global meter this installs.
	if err := telemetry.SetNaming(telemetry.Naming{MetricPrefix: cfg.MetricPrefix, SpanPrefix: cfg.SpanPrefix, Names: cfg.TelemetryNames}); err != nil {
		return nil, err
	}
	if d.tel, err = export.Setup(ctx, export.Config{}); err != nil {
		return nil, err
	}
	// One authenticator, so /v1, MCP, E2B and the guard share one cache.
	d.auth = tenant.NewAuthenticator(st, tenant.AuthConfig{})
	// What sandboxes cause to be audited (connections, lookups, findings)
	// reaches the store through one writer: fair across tenants, batched.
	d.trail = audit.NewWriter(st, audit.WriterConfig{Log: log})
	if d.nw, err = newNetworks(cfg, st, d.trail, log); err != nil {
		return nil, err
	}
	nw := d.nw
	if cfg.uses("kubernetes") {
		if d.kegress, err = newKubeEgress(cfg, st, d.trail, log); err != nil {
			return nil, err
		}
	}
	tw := &templateWire{store: st, host: cfg.Images.HostTemplate, desktop: cfg.Desktop.offered(), pullAllow: cfg.Build.PullAllow, log: log}
	if cfg.Images.Default == DefaultImageDebian {
		tw.defaultKernels = templates.DefaultImageKernels
	}
	d.vols = newVolumes(cfg, st, log)
	prov, provErr := newProvider(ctx, cfg, log, nw, tw, d.kegress, d.vols)
	if nw != nil && nw.startErr != nil {
		return nil, fmt.Errorf("sandbox networks: %w", nw.startErr)
	}
	if prov == nil {
		return nil, provErr // a provider's settings that do not parse
	}
	g, err := newGuard(cfg.DataDir, cfg.GuardEntities, st, d.auth, nw, d.kegress.serving(), d.trail, log)
	if err != nil {
		return nil, err
	}
	d.guard = g
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
		op, err := cfg.Network.operator()
		if err != nil {
			return nil, err
		}
		mcfg.Networks = policyOnly{op}
	}
	if tw.catalog != nil {
		mcfg.Catalog = tw.catalog
	}
	if d.vols != nil {
		mcfg.Volumes = d.vols
	}
	mcfg.IdleSuspendOf = idleSuspendOf(tw.catalog, st)
	cfg.desktopPool(&mcfg, tw)
	m := contexts.NewManager(st, prov, mcfg)
	if nw != nil {
		nw.guard.g, nw.guard.m = g, m
	}
	// A built-in's new image (the default's full image after its core)
	// serves new sandboxes only: the warm pool's are of the image before.
	tw.builtins.onServe(m.RefreshPool)
	if err := m.Start(ctx); err != nil {
		return nil, fmt.Errorf("start the context manager: %w", err)
	}
	d.manager = m
	tcfg := tools.Config{MaxCodeBytes: mcfg.MaxCodeBytes, TTL: mcfg.TTL, MaxExecutions: mcfg.MaxExecutionsPerContext,
		Logger: log, Unavailable: provErr, OnCall: toolAudit(d.trail)}
	if dm := cfg.desktopManager(m, tw, d.kegress.servesPorts(), log); dm != nil {
		tcfg.Desktop = dm
		d.liveViews = cfg.servesPorts(d.kegress.servesPorts())
	}
	d.tools = tools.New(m, tcfg)

	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stopLoops = stop
	reaper := &tenantReaper{st: st, m: m, log: log}
	d.loop(func() { reaper.run(lctx) })
	d.loop(func() { tw.gcLoop(lctx, cfg.Images.GCInterval) })
	if d.vols != nil {
		d.loop(func() { sweepVolumes(lctx, d.vols, log) })
	}

	q, err := buildQueue(cfg, prov, tw.catalog, g, log)
	if err != nil {
		return nil, err
	}
	if cfg.Stdio {
		return d, nil
	}
	fc, err := d.surfaces(parts{st: st, prov: prov, provErr: provErr, nw: nw, tw: tw, builds: q, metrics: d.tel.Handler()})
	if err != nil {
		return nil, err
	}
	d.front = newFrontDoor(fc)
	return d, nil
}

// loop runs fn in a goroutine that Close waits for.
func (d *Daemon) loop(fn func()) {
	done := make(chan struct{})
	d.loopsDone = append(d.loopsDone, done)
	go func() { defer close(done); fn() }()
}

// newGuard is the egress guard every result passes, with its findings to
// the audit trail and, with sandbox networks, the tenants' stored secret
// values among the values it masks (guard.Config.Known).
func newGuard(dataDir string, entities []string, st store.Backend, auth *tenant.Authenticator, nw *netWire, podSecrets bool, trail *audit.Writer, log *slog.Logger) (*guard.Guard, error) {
	hmacKey, err := guardKey(dataDir)
	if err != nil {
		return nil, err
	}
	var known func(ctx context.Context, tenantID string) ([]string, error)
	if nw != nil || podSecrets {
		known = knownValues(st)
	}
	gcfg := guard.Config{
		HMACKey:  hmacKey,
		Known:    known,
		Entities: entities,
		// Requests carry their tenant, whose mode the guard reads; this is
		// for work outside a request (cleanup, reconcile).
		ModeFor: func(ctx context.Context, tenantID string) string {
			if t, err := auth.Tenant(ctx, tenantID); err == nil {
				return t.GuardMode
			}
			return tenant.GuardEnforce
		},
		// The same for the tenant's entity types; nil (unknown tenant, or
		// none chosen) is --guard-entities.
		EntitiesFor: func(ctx context.Context, tenantID string) []string {
			if t, err := auth.Tenant(ctx, tenantID); err == nil {
				return t.GuardEntities
			}
			return nil
		},
		Audit: func(ctx context.Context, ev guard.Event) {
			trail.Add(store.AuditEvent{TenantID: ev.TenantID, Kind: audit.KindGuardFinding, At: time.Now(),
				Detail: map[string]string{"type": ev.Type, "mode": ev.Mode, "task": ev.Task, "hmac": ev.HMAC,
					"start": strconv.Itoa(ev.Start), "end": strconv.Itoa(ev.End)}})
		},
	}
	m, merr := entityModel()
	withEntityModel(&gcfg, log, m, merr)
	g, err := guard.New(gcfg)
	if err != nil {
		return nil, err
	}
	guardMeters(g)
	if nw != nil {
		nw.forget = g.Forget
	}
	return g, nil
}

// managerConfig is the manager's configuration from cfg, without the parts
// New builds (guard, logger, networks, catalog).
func (c Config) managerConfig() contexts.Config {
	mcfg := contexts.Config{
		TTL:                     c.ContextTTL,
		CleanupInterval:         c.CleanupInterval,
		IdleSuspend:             c.IdleSuspend,
		AuditRetention:          c.AuditRetention,
		DefaultTimeout:          c.ExecTimeout,
		MaxTimeout:              c.MaxExecTimeout,
		MaxPerTenant:            c.MaxPerTenant,
		MaxPerConversation:      c.MaxPerConversation,
		MaxExecutionsPerContext: c.MaxExecutions,
		Limits:                  c.Limits,
		Node:                    c.Node,
		LeaseTTL:                c.LeaseTTL,
		PoolMemoryBudget:        c.PoolMemoryBudget,
	}
	if c.PoolSize >= 0 {
		mcfg.PoolSize = c.PoolSize
		if c.PoolSize == 0 {
			mcfg.PoolSize = -1
		}
	}
	if len(c.PoolSizes) > 0 {
		mcfg.PoolSizes = c.PoolSizes
	}
	if c.providers()[0] == "local" {
		// E2B's base sandbox runs commands: its warm sandboxes start no
		// kernel (the E2B edge asks for none), so a refill costs half the
		// CPU it would with the python that /v1's pool keeps started.
		mcfg.PoolWarmKernels = [][]string{{}}
	}
	if c.providers()[0] == "kubernetes" {
		// agent-sandbox keeps the warm pods (kubernetesProvider). The
		// templates are the default and those the configuration names
		// (a pool or a pod image): without PoolSizes the manager would
		// know the default alone.
		mcfg.PoolSize, mcfg.PoolSizes = -1, nil
		mcfg.Templates = []string{templates.Default}
		for name := range c.kubernetesTemplates() {
			if name != templates.Default {
				mcfg.Templates = append(mcfg.Templates, name)
			}
		}
		slices.Sort(mcfg.Templates[1:])
	}
	return mcfg
}

// Handler is the front door: every surface of the daemon on one handler.
// Nil with Config.Stdio.
func (d *Daemon) Handler() http.Handler {
	if d.front == nil {
		return nil
	}
	return d.front
}

// Serve serves the front door on ln until ctx ends, then shuts down
// gracefully: it stops accepting, lets requests in flight (executions,
// streams) finish for up to Config.ShutdownTimeout, and then closes what
// is left. It returns nil after a shutdown caused by ctx. Serve may run on
// several listeners at once (plain and TLS); Close comes after.
func (d *Daemon) Serve(ctx context.Context, ln net.Listener) error {
	if d.front == nil {
		return errors.New("daemon: Serve without a front door (Config.Stdio)")
	}
	return d.front.serve(ctx, ln)
}

// Close stops the daemon: its loops, the manager (which detaches its
// sandboxes, leaving them running for the next start to reattach), the
// networks' proxy and resolver (the networks stay with their sandboxes)
// and the exporters; then it releases the state dir. Later calls return
// the first call's error.
func (d *Daemon) Close(ctx context.Context) error {
	d.closeOnce.Do(func() {
		if d.stopLoops != nil {
			d.stopLoops()
		}
		for _, done := range d.loopsDone {
			<-done
		}
		var errs []error
		if d.manager != nil {
			errs = append(errs, d.manager.Close(ctx))
		}
		errs = append(errs, d.nw.close(ctx))
		d.kegress.close()
		if d.auth != nil {
			errs = append(errs, d.auth.Wait(ctx))
		}
		// The trail after the manager and the networks: it writes what
		// they sent.
		if d.trail != nil {
			errs = append(errs, d.trail.Close(ctx))
		}
		if d.tel != nil {
			errs = append(errs, d.tel.Shutdown(ctx))
		}
		if d.unlock != nil {
			d.unlock()
		}
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}

// Node is the daemon's node id (Config.Node, resolved).
func (d *Daemon) Node() string { return d.cfg.Node }

// Manager is the daemon's context manager.
func (d *Daemon) Manager() *contexts.Manager { return d.manager }

// MetricsToken is the bearer token GET /metrics requires (DATA/metrics-
// token); "" with Config.Stdio.
func (d *Daemon) MetricsToken() string {
	if d.front == nil {
		return ""
	}
	return d.front.metricsToken
}
