package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/ports"
	"github.com/sandlot/sandlot/network/secret"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/telemetry/export"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
)

func init() {
	commands = append(commands, newServeCmd)
}

// serveConfig is what `sandlot serve` is told by its flags.
type serveConfig struct {
	e2b             e2bFlags
	addr            string
	tlsAddr         string // --tls-addr: the front door over TLS too
	tlsCert         string
	tlsKey          string
	store           storeFlags
	runtime         string
	stateDir        string
	providers       string
	shutdownTimeout time.Duration
	logLevel        string
	metricPrefix    string // telemetry: first part of metric names
	spanPrefix      string // telemetry: prefix of span names, if any
	maxPerTenant    int
	maxPerConv      int
	memoryMiB       int64
	pids            int64
	cpus            float64
	diskMiB         int64
	poolSize        int
	poolSizes       poolSizes // contexts.Config.PoolSizes
	maxExecutions   int64     // contexts.Config.MaxExecutionsPerContext (the bench sets -1)

	// The manager's lifecycle (contexts.Config); zero keeps its default.
	contextTTL      time.Duration
	cleanupInterval time.Duration
	auditRetention  time.Duration // contexts.Config.AuditRetention; 0 keeps events forever
	execTimeout     time.Duration // contexts.Config.DefaultTimeout
	maxExecTimeout  time.Duration // contexts.Config.MaxTimeout
	// The local provider's creation (local.Config); zero keeps its default.
	createTimeout time.Duration // local.Config.ReadyTimeout
	maxCreating   int           // local.Config.MaxCreating
	guardMode     string        // the first start's tenant; "" is enforce
	configFile    string        // --config: the file of config keys (config.go)

	maxInFlight          int           // server.AdmissionConfig.MaxInFlight
	maxInFlightPerTenant int           // server.AdmissionConfig.MaxInFlightPerTenant
	bodyReadTimeout      time.Duration // server.Config.BodyReadTimeout
	e2bMaxTimeout        time.Duration // e2bcompat.Config.MaxTimeout
	e2bTokenTTL          time.Duration // e2bcompat.Config.TokenTTL
	e2bInterpTemplate    string        // what E2B's code-interpreter-v1 creates ("": default)
	e2bPausedTimeout     time.Duration // e2bcompat.Config.PausedTimeout
	e2bInternet          bool          // e2bcompat.Config.DefaultOpen
	e2bPython            string        // ipython or plain: e2bcompat.Config.PlainPython
	bootstrapAdmin       bool          // the first start's tenant may override the guard
	node                 string
	network              networkFlags
	build                buildFlags
	desktop              desktopFlags

	// The local provider's templates (images.go). defaultImage "" (a
	// serveConfig built in code, the bench) runs every sandbox on the
	// host template, as before images.
	imagesDir    string
	defaultImage string
	hostTemplate bool
	// imageGCInterval schedules the image GC (templatewire.go); 0: never.
	imageGCInterval time.Duration
}

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "serve", Short: "run the sandlot daemon (HTTP API, MCP, E2B wire) on " + api.DefaultAddr, Args: cobra.NoArgs}
	fs := cmd.Flags()
	var cfg serveConfig
	cfg.registerServe(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		if err := cfg.load(fs); err != nil {
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
		if err := bootstrapTenant(ctx, st, cfg.store.dataDir, cfg.guardMode, cfg.bootstrapAdmin, std); err != nil {
			return err
		}
		w, err := wire(ctx, cfg, st, log)
		if err != nil {
			return err
		}
		srv, _, err := frontDoor(cfg, w, log)
		if err != nil {
			w.close(context.Background())
			return err
		}
		ln, err := net.Listen("tcp", cfg.addr)
		if err != nil {
			w.close(context.Background())
			return fmt.Errorf("listen %s: %v: %w", cfg.addr, err, errdefs.ErrUnavailable)
		}
		tln, err := tlsListener(cfg)
		if err != nil {
			ln.Close()
			w.close(context.Background())
			return err
		}
		log.Info("listening", slog.String(logkey.Addr, ln.Addr().String()), slog.String("data_dir", cfg.store.dataDir), slog.String(logkey.Node, cfg.node))
		if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
			log.Warn("listening beyond loopback: anyone who can reach this address can try keys; put TLS in front",
				slog.String(logkey.Addr, ln.Addr().String()))
		}
		if tln != nil {
			fmt.Fprintf(std.Out, "sandlot listening with TLS on https://%s\n", tln.Addr())
		}
		fmt.Fprintf(std.Out, "sandlot listening on http://%s\n", ln.Addr())
		waitTLS := serveTLS(ctx, srv, tln, log)
		serr := srv.Serve(ctx, ln)
		waitTLS()
		// Detach: sandboxes keep running and the next start reattaches them.
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cerr := w.close(cctx)
		log.Info("stopped")
		return errors.Join(serr, cerr)
	}
	return cmd
}

func newLogger(std IO, level string) *slog.Logger { return export.NewLogger(std.Err, level) }

// bootstrapTenant creates the default tenant when the store has none,
// prints its key once and writes it to DATA/api-key (0600), where the CLI
// and scripts find it. The tenant is an admin (it may switch the guard off
// per request) only when asked: the key printed at first start ends up in
// shells and scripts.
func bootstrapTenant(ctx context.Context, st store.Backend, dataDir, guard string, admin bool, std IO) error {
	ts, err := st.ListTenants(ctx)
	if err != nil {
		return fmt.Errorf("list tenants: %w", err)
	}
	if len(ts) > 0 {
		return nil
	}
	t, key, err := createTenant(ctx, st, "default", cmp.Or(guard, tenant.GuardEnforce), admin)
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

// wired is what wire assembles: the daemon without its front door.
type wired struct {
	manager *contexts.Manager
	builds  *builds.Queue // template builds (E2B and /v1); nil when off
	tools   *tools.Registry
	ready   map[string]server.Check
	metrics http.Handler // the exporter's Prometheus exposition
	// auth is shared by the server, MCP, the E2B handler and the guard:
	// one key and tenant cache.
	auth *tenant.Authenticator
	// admission is shared by the server and the E2B handler, so one
	// tenant's in-flight limit covers every surface.
	admission *server.Admission
	audit     func(ctx context.Context, tenantID string, limit int) ([]store.AuditEvent, error)
	// guardText passes what a sandbox chose outside its output (the
	// names in its audit events) through the guard.
	guardText func(ctx context.Context, tenantID, contextID, text string) string
	nw        *netWire       // sandbox networks; nil without --network
	ports     *ports.Handler // sandbox ports; nil without --network
	// secrets keeps tenants' secrets for /v1/secrets; nil without
	// --network (nothing would use them). secretsChanged reloads them.
	secrets        secret.Store
	secretsChanged func(tenantID string)
	// templates serves /v1/templates; nil without an image store.
	templates *templates.Catalog
	close     func(ctx context.Context) error
}

func (w *wired) portsHandler() http.Handler {
	if w.ports == nil {
		return nil
	}
	return w.ports
}

func (w *wired) portsMatch() func(*http.Request) bool {
	if w.ports == nil {
		return nil
	}
	return w.ports.Match
}

// storeCheck is the readiness probe of the store: a cheap read.
func storeCheck(st store.Backend) server.Check {
	return func(ctx context.Context) error {
		_, err := st.ListTenants(ctx)
		return err
	}
}

// limits are the per-sandbox limits the flags set; zero fields keep the
// provider's defaults.
func (c serveConfig) limits() contexts.Limits {
	return contexts.Limits{MemoryBytes: c.memoryMiB << 20, PIDs: c.pids, CPUs: c.cpus, DiskBytes: c.diskMiB << 20}
}
