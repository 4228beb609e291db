package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/telemetry/export"
	"github.com/sandlot/sandlot/tenant"
)

func init() {
	commands = append(commands, newServeCmd)
}

// serveConfig is what `sandlot serve` and `sandlot mcp` are told by their
// flags, the environment and the config file (config.go): the daemon's
// Config, whose fields most flags set directly, and what the commands
// themselves use or turn into Config fields (load).
type serveConfig struct {
	daemon.Config

	store      storeFlags
	configFile string // --config: the file of config keys (config.go)
	logLevel   string
	providers  string // Config.Providers, comma-separated
	// The per-sandbox limits in the flags' units (Config.Limits).
	memoryMiB int64
	pids      int64
	cpus      float64
	diskMiB   int64
	// poolBudgetMiB is Config.PoolMemoryBudget in MiB (-1: pools never grow).
	poolBudgetMiB int64
	// The first start's tenant (bootstrapTenant): its guard mode ("" is
	// enforce) and whether it may override the guard.
	guardMode      string
	guardEntities  string
	bootstrapAdmin bool
	// auditRetention is Config.AuditRetention in the flag's terms: 0
	// keeps audit events forever.
	auditRetention time.Duration

	// serve's listeners.
	addr    string
	tlsAddr string // --tls-addr: the front door over TLS too
	tlsCert string
	tlsKey  string

	// aliases are the specifications' names of settings read at start
	// (aliases.go), logged once the logger exists.
	aliases []aliasUse
}

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "serve", Short: "run the sandlot daemon (HTTP API, MCP, E2B wire) on " + api.DefaultAddr, Args: cobra.NoArgs,
		Example: `  sudo sandlot serve
  sudo sandlot serve --data-dir /var/lib/sandlot --addr 0.0.0.0:7423 --tls-addr :443 --tls-cert c.pem --tls-key k.pem
  sudo sandlot serve --config /etc/sandlot/sandlot.yaml
  SANDLOT_CONTEXT_TTL=10m sudo -E sandlot serve`}
	fs := cmd.Flags()
	var cfg serveConfig
	cfg.registerServe(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		if err := cfg.load(fs); err != nil {
			return err
		}
		if err := cfg.checkTLS(); err != nil {
			return err
		}
		log := newLogger(std, cfg.logLevel)
		cfg.Logger, cfg.Version = log, Version()
		logAliases(log, cfg.aliases)
		st, err := cfg.store.open(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		if cfg.Kubernetes.EgressProxy != "" && slices.Contains(cfg.Providers, "kubernetes") {
			// The pods' proxy credentials: every replica has the secrets
			// key, so any replica checks any pod's.
			key, err := daemon.SecretsKey(cfg.store.dataDir, cfg.store.secretsKeyFile, os.Getenv(envSecretsKey))
			if err != nil {
				return err
			}
			cfg.Kubernetes.EgressKey = daemon.EgressKey(key)
		}
		d, err := daemon.New(ctx, cfg.Config, st)
		if err != nil {
			return err
		}
		// Detach: sandboxes keep running and the next start reattaches them.
		closeDaemon := func() error {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return d.Close(cctx)
		}
		ts, _ := st.ListTenants(ctx)
		firstStart := len(ts) == 0
		if err := bootstrapTenant(ctx, st, cfg.DataDir, cfg.guardMode, cfg.bootstrapAdmin, std); err != nil {
			closeDaemon()
			return err
		}
		ln, err := net.Listen("tcp", cfg.addr)
		if err != nil {
			closeDaemon()
			return fmt.Errorf("listen %s: %v: %w", cfg.addr, err, errdefs.ErrUnavailable)
		}
		var tln net.Listener
		if cfg.tlsAddr != "" {
			if tln, err = daemon.ListenTLS(cfg.tlsAddr, cfg.tlsCert, cfg.tlsKey); err != nil {
				ln.Close()
				closeDaemon()
				return err
			}
		}
		log.Info("listening", slog.String(logkey.Addr, ln.Addr().String()), slog.String("data_dir", cfg.DataDir), slog.String(logkey.Node, d.Node()))
		if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
			log.Warn("listening beyond loopback: anyone who can reach this address can try keys; put TLS in front",
				slog.String(logkey.Addr, ln.Addr().String()))
		}
		if tln != nil {
			fmt.Fprintf(std.Out, "sandlot listening with TLS on https://%s\n", tln.Addr())
		}
		fmt.Fprintf(std.Out, "sandlot listening on http://%s\n", ln.Addr())
		if firstStart {
			// The CLI finds the key in ./.sandlot here; a context finds it
			// from any directory.
			if abs, err := filepath.Abs(filepath.Join(cfg.DataDir, keyFile)); err == nil {
				fmt.Fprintf(std.Out, "Use the CLI from any directory: sandlot config add-context local --url http://%s --api-key-file %s\n", ln.Addr(), abs)
			}
		}
		waitTLS := serveTLS(ctx, d, tln, log)
		serr := d.Serve(ctx, ln)
		waitTLS()
		cerr := closeDaemon()
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
// shells and scripts. Replicas that start at once on an empty store make
// one tenant: the others find its name taken and go on.
func bootstrapTenant(ctx context.Context, st store.Backend, dataDir, guard string, admin bool, std IO) error {
	ts, err := st.ListTenants(ctx)
	if err != nil {
		return fmt.Errorf("list tenants: %w", err)
	}
	if len(ts) > 0 {
		return nil
	}
	t, key, err := createTenant(ctx, st, "default", cmp.Or(guard, tenant.GuardEnforce), admin, nil, 0)
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		// Another replica on the same store made it between the list and
		// the create; its start printed the key.
		return nil
	}
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

// checkTLS refuses half a TLS configuration before anything starts.
func (c *serveConfig) checkTLS() error {
	if c.tlsAddr == "" {
		if c.tlsCert != "" || c.tlsKey != "" {
			return usageErr("--tls-cert and --tls-key need --tls-addr")
		}
		return nil
	}
	if c.tlsCert == "" || c.tlsKey == "" {
		return usageErr("--tls-addr needs --tls-cert and --tls-key")
	}
	return nil
}

// serveTLS serves d on ln (when not nil) until ctx ends; its error, if the
// listener fails early, is logged: the plain listener keeps serving.
func serveTLS(ctx context.Context, d *daemon.Daemon, ln net.Listener, log *slog.Logger) (wait func()) {
	if ln == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.Serve(ctx, ln); err != nil {
			log.Error("TLS listener stopped", slog.String(logkey.Addr, ln.Addr().String()), slog.String(logkey.Err, err.Error()))
		}
	}()
	return func() { <-done }
}

// limits are the per-sandbox limits the flags set; zero fields keep the
// provider's defaults.
func (c serveConfig) limits() contexts.Limits {
	return contexts.Limits{MemoryBytes: c.memoryMiB << 20, PIDs: c.pids, CPUs: c.cpus, DiskBytes: c.diskMiB << 20}
}
