package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/tenant"
)

func init() {
	commands["serve"] = command{summary: "run the sandlot daemon (HTTP API, MCP, E2B wire) on " + api.DefaultAddr, run: runServe}
}

// serveConfig is what `sandlot serve` is told by its flags.
type serveConfig struct {
	addr            string
	store           storeFlags
	runtime         string
	stateDir        string
	providers       string
	shutdownTimeout time.Duration
	logLevel        string
	maxPerTenant    int
	maxPerConv      int
	memoryMiB       int64
	pids            int64
	cpus            float64
	diskMiB         int64
	poolSize        int
	maxExecutions   int64 // contexts.Config.MaxExecutionsPerContext (no flag; the bench sets -1)

	maxInFlight          int           // server.AdmissionConfig.MaxInFlight
	maxInFlightPerTenant int           // server.AdmissionConfig.MaxInFlightPerTenant
	bodyReadTimeout      time.Duration // server.Config.BodyReadTimeout
	e2bMaxTimeout        time.Duration // e2bcompat.Config.MaxTimeout
	e2bTokenTTL          time.Duration // e2bcompat.Config.TokenTTL
	bootstrapAdmin       bool          // the first start's tenant may override the guard
	node                 string

	// The local provider's templates (images.go). defaultImage "" (a
	// serveConfig built in code, the bench) runs every sandbox on the
	// host template, as before images.
	imagesDir    string
	defaultImage string
	hostTemplate bool
}

func runServe(ctx context.Context, args []string, std IO) error {
	fs := newFlags("serve", std)
	var cfg serveConfig
	addr := os.Getenv("SANDLOT_ADDR")
	if addr == "" {
		addr = api.DefaultAddr
	}
	fs.StringVar(&cfg.addr, "addr", addr, "listen address, HOST:PORT ($SANDLOT_ADDR); loopback by default")
	cfg.store.register(fs)
	fs.StringVar(&cfg.runtime, "runtime", "auto", "OCI runtime: auto, crun, runc, runsc")
	fs.StringVar(&cfg.stateDir, "state-dir", "", "runtime state (bundles, agent sockets); default /run/sandlot")
	fs.StringVar(&cfg.providers, "providers", "local", "sandbox providers in fallback order, comma-separated (local, e2b)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "on SIGTERM, how long in-flight requests may finish")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn, error")
	fs.IntVar(&cfg.maxPerTenant, "max-contexts-per-tenant", 0, "active contexts per tenant (0: the manager default, 10)")
	fs.IntVar(&cfg.maxPerConv, "max-contexts-per-conversation", 0, "active contexts per conversation (0: the manager default, 5)")
	fs.Int64Var(&cfg.memoryMiB, "sandbox-memory", 0, "memory limit per sandbox in MiB (0: the provider default, 2048)")
	fs.Int64Var(&cfg.pids, "sandbox-pids", 0, "process limit per sandbox (0: the provider default, 256)")
	fs.Float64Var(&cfg.cpus, "sandbox-cpus", 0, "CPU quota per sandbox in cores (0: the provider default, 1)")
	fs.Int64Var(&cfg.diskMiB, "sandbox-disk", 0, "writable space per sandbox in MiB: the whole writable layer of an image template, each of /home/user and /tmp under the host template (0: the provider default, 512)")
	fs.IntVar(&cfg.poolSize, "pool-size", -1, "warm sandboxes kept per template (-1: the manager default)")
	fs.IntVar(&cfg.maxInFlight, "max-inflight", 0, "requests in flight at once, all callers (0: 1024; -1: unlimited); more answer 429 with Retry-After")
	fs.IntVar(&cfg.maxInFlightPerTenant, "max-inflight-per-tenant", 0, "requests in flight at once per tenant, open streams included (0: 64; -1: unlimited)")
	fs.DurationVar(&cfg.bodyReadTimeout, "body-read-timeout", 0, "time a request body may take to arrive, plus 1 s per 32 KiB (0: 30s); slower is a 408")
	fs.DurationVar(&cfg.e2bMaxTimeout, "e2b-max-timeout", 0, "largest E2B sandbox timeout a caller may ask for (0: 24h, E2B Pro's cap); more is a 400")
	fs.DurationVar(&cfg.e2bTokenTTL, "e2b-token-ttl", 0, "lifetime of E2B access tokens; connect hands out new ones (0: 24h)")
	fs.BoolVar(&cfg.bootstrapAdmin, "bootstrap-admin", false, "on first start, make the default tenant an admin (may switch the guard off per request)")
	fs.StringVar(&cfg.imagesDir, "images-dir", "", "image store of the local provider's templates (default DATA_DIR/images)")
	fs.StringVar(&cfg.defaultImage, "default-image", defaultImageDebian, "the default template: debian (built from the Debian mirror at first start, cached) or none (name an image \"default\" yourself)")
	fs.BoolVar(&cfg.hostTemplate, "host-template", false, "also offer the template \"host\": the host's /usr read-only (without /usr/local), for hosts without images")
	registerNode(fs, &cfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log := newLogger(std, cfg.logLevel)
	if usesLocal(cfg.providers) {
		unlock, err := lockStateDir(cfg.stateDir)
		if err != nil {
			return err
		}
		defer unlock()
	}
	node, err := resolveNode(cfg.node, cfg.store.dataDir, cfg.stateDir, oci.DefaultStateDir)
	if err != nil {
		return err
	}
	cfg.node = node

	st, err := cfg.store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := bootstrapTenant(ctx, st, cfg.store.dataDir, cfg.bootstrapAdmin, std); err != nil {
		return err
	}
	w, err := wire(ctx, cfg, st, log)
	if err != nil {
		return err
	}
	srv := server.New(w.serverConfig(cfg, st, log))
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		w.close(context.Background())
		return fmt.Errorf("listen %s: %v: %w", cfg.addr, err, errdefs.ErrUnavailable)
	}
	log.Info("listening", slog.String("addr", ln.Addr().String()), slog.String("data_dir", cfg.store.dataDir), slog.String("node", cfg.node))
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
		log.Warn("listening beyond loopback: anyone who can reach this address can try keys; put TLS in front",
			slog.String("addr", ln.Addr().String()))
	}
	fmt.Fprintf(std.Out, "sandlot listening on http://%s\n", ln.Addr())
	serr := srv.Serve(ctx, ln)
	// Detach: sandboxes keep running and the next start reattaches them.
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cerr := w.close(cctx)
	log.Info("stopped")
	return errors.Join(serr, cerr)
}

func newLogger(std IO, level string) *slog.Logger { return telemetry.NewLogger(std.Err, level) }

// bootstrapTenant creates the default tenant when the store has none,
// prints its key once and writes it to DATA/api-key (0600), where the CLI
// and scripts find it. The tenant is an admin (it may switch the guard off
// per request) only when asked: the key printed at first start ends up in
// shells and scripts.
func bootstrapTenant(ctx context.Context, st store.Backend, dataDir string, admin bool, std IO) error {
	ts, err := st.ListTenants(ctx)
	if err != nil {
		return fmt.Errorf("list tenants: %w", err)
	}
	if len(ts) > 0 {
		return nil
	}
	t, key, err := createTenant(ctx, st, "default", tenant.GuardEnforce, admin)
	if err != nil {
		return fmt.Errorf("create the default tenant: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dataDir, keyFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the key file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write the key file: %w", err)
	}
	fmt.Fprintf(std.Out, "created the default tenant %s\nAPI key (shown once; also in %s): %s\n", t.ID, path, key)
	return nil
}

// wired is what wire assembles for the server.
type wired struct {
	contexts server.Contexts
	tools    server.Tools
	ready    map[string]server.Check
	mcp      http.Handler
	e2b      http.Handler
	e2bMatch func(*http.Request) bool
	metrics  http.Handler
	// admission is shared by the server and the E2B handler, so one
	// tenant's in-flight limit covers every surface.
	admission    *server.Admission
	metricsToken string
	audit        func(ctx context.Context, tenantID string, limit int) ([]store.AuditEvent, error)
	close        func(ctx context.Context) error
}

// serverConfig is the HTTP server over w, the same for serve and the
// in-process daemon of the bench and tests.
func (w *wired) serverConfig(cfg serveConfig, st store.Backend, log *slog.Logger) server.Config {
	return server.Config{
		Contexts:        w.contexts,
		Tools:           w.tools,
		Tenants:         st,
		Logger:          log,
		ShutdownTimeout: cfg.shutdownTimeout,
		Ready:           w.ready,
		MCP:             w.mcp,
		E2B:             w.e2b,
		E2BMatch:        w.e2bMatch,
		Metrics:         w.metrics,
		MetricsToken:    w.metricsToken,
		Admission:       w.admission,
		BodyReadTimeout: cfg.bodyReadTimeout,
		E2BError:        e2bcompat.WriteError,
		Audit:           w.audit,
	}
}

// storeCheck is the readiness probe of the store: a cheap read.
func storeCheck(st store.Backend) server.Check {
	return func(ctx context.Context) error {
		_, err := st.ListTenants(ctx)
		return err
	}
}

// registerNode adds --node, shared by serve and mcp.
func registerNode(fs *flag.FlagSet, cfg *serveConfig) {
	fs.StringVar(&cfg.node, "node", "", "this daemon's node id in a store shared with other daemons ($"+envNode+
		"; default: one kept in DATA/nodes/ per state dir, so a restart keeps it)")
}

// limits are the per-sandbox limits the flags set; zero fields keep the
// provider's defaults.
func (c serveConfig) limits() contexts.Limits {
	return contexts.Limits{MemoryBytes: c.memoryMiB << 20, PIDs: c.pids, CPUs: c.cpus, DiskBytes: c.diskMiB << 20}
}
