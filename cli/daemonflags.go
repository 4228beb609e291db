package cli

import (
	"os"

	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/tenant"
)

// daemonDefaults are the defaults in which serve and mcp differ: one MCP
// session needs one sandbox, keeps its own state dir and logs quietly to
// stderr beside the protocol.
type daemonDefaults struct {
	stateDir, logLevel string
	poolSize           int
	// defaultImage: "" runs the default template on the host's /usr, as
	// before images (mcp, until its first start can wait for a build).
	defaultImage string
}

// registerDaemon adds the flags of the daemon behind every front end, the
// one flag set serve and mcp share: where state lives (store, state dir,
// node), what runs sandboxes (runtime, providers), the manager's and the
// sandboxes' limits, the warm pool, logging and the first start's tenant.
// A flag that configures the daemon is added here, so both commands take
// it with the same name and meaning.
func (c *serveConfig) registerDaemon(fs *flag.FlagSet, d daemonDefaults) {
	fs.StringVar(&c.configFile, "config", os.Getenv(envConfig), "config file (YAML, TOML or JSON by its extension) whose keys are these flags' names ($"+envConfig+"); a flag beats $SANDLOT_<NAME> beats the file")
	c.store.register(fs)
	c.store.keyed = true
	fs.StringVar(&c.store.secretsKeyFile, "secrets-key-file", "", "the key that encrypts tenants' secrets in the store, 32 bytes raw or base64 (default: $"+envSecretsKey+
		", else DATA/secrets-key, made on first start; daemons sharing a store need the same key)")
	stateHelp := "runtime state (bundles, agent sockets); default /run/sandlot"
	if d.stateDir != "" {
		stateHelp = "runtime state (bundles, agent sockets); one process at a time per state dir"
	}
	fs.StringVar(&c.stateDir, "state-dir", d.stateDir, stateHelp)
	fs.StringVar(&c.runtime, "runtime", "auto", "OCI runtime: auto, crun, runc, runsc")
	fs.StringVar(&c.providers, "providers", "local", "sandbox providers in fallback order, comma-separated (local, e2b)")
	fs.StringVar(&c.logLevel, "log-level", d.logLevel, "debug, info, warn, error (logs go to stderr)")
	fs.IntVar(&c.maxPerTenant, "max-contexts-per-tenant", 0, "active contexts per tenant (0: the manager default, 10)")
	fs.IntVar(&c.maxPerConv, "max-contexts-per-conversation", 0, "active contexts per conversation (0: the manager default, 5)")
	fs.Int64Var(&c.memoryMiB, "sandbox-memory", 0, "memory limit per sandbox in MiB (0: the provider default, 2048)")
	fs.Int64Var(&c.pids, "sandbox-pids", 0, "process limit per sandbox (0: the provider default, 256)")
	fs.Float64Var(&c.cpus, "sandbox-cpus", 0, "CPU quota per sandbox in cores (0: the provider default, 1)")
	fs.Int64Var(&c.diskMiB, "sandbox-disk", 0, "writable space per sandbox in MiB: the whole writable layer of an image template, each of /home/user and /tmp under the host template (0: the provider default, 512)")
	fs.StringVar(&c.imagesDir, "images-dir", "", "image store of the local provider's templates (default DATA_DIR/images)")
	imageHelp := "the default template: debian (built from the Debian mirror at first start, cached) or none (name an image \"default\" yourself)"
	if d.defaultImage == "" {
		imageHelp += "; unset: the host's /usr read-only"
	}
	fs.StringVar(&c.defaultImage, "default-image", d.defaultImage, imageHelp)
	fs.DurationVar(&c.imageGCInterval, "image-gc-interval", defaultImageGCInterval, "how often image layers that no template, named image or sandbox uses are removed (0: never)")
	fs.BoolVar(&c.hostTemplate, "host-template", false, "also offer the template \"host\": the host's /usr read-only (without /usr/local), for hosts without images")
	poolHelp := "warm sandboxes kept per template (-1: the manager default)"
	if d.poolSize == 0 {
		poolHelp = "warm sandboxes kept per template (0: none)"
	}
	fs.IntVar(&c.poolSize, "pool-size", d.poolSize, poolHelp)
	fs.Var(&c.poolSizes, "pool-sizes", "warm sandboxes of named templates, NAME=N,... (overrides --pool-size for them; 0 turns a template's pool off)")
	fs.IntVar(&c.maxCreating, "max-creating", 0, "sandboxes being created at once by the local provider; more wait (0: the CPUs, at least 2)")
	fs.DurationVar(&c.createTimeout, "create-timeout", defaultCreateTimeout, "time a local sandbox may take from create to healthy (waiting for --max-creating not counted)")
	c.registerLifecycle(fs)
	c.e2b.register(fs)
	fs.StringVar(&c.guardMode, "guard-mode", tenant.GuardEnforce, "egress guard mode of the tenant created at first start: off, report, enforce (tenant create --guard-mode sets others')")
	fs.BoolVar(&c.bootstrapAdmin, "bootstrap-admin", false, "on first start, make the default tenant an admin (may switch the guard off per request)")
	fs.StringVar(&c.metricPrefix, "telemetry-prefix", telemetry.DefaultPrefix, "application prefix of metric names (sandlot.executions)")
	fs.StringVar(&c.spanPrefix, "telemetry-span-prefix", "", "application prefix of span names (default none: execution_context.get_or_create)")
	fs.StringVar(&c.node, "node", "", "this daemon's node id in a store shared with other daemons ($"+envNode+
		"; default: one kept in DATA/nodes/ per state dir, so a restart keeps it)")
}

// registerLifecycle adds the flags of the context manager's lifecycle
// (contexts.Config).
func (c *serveConfig) registerLifecycle(fs *flag.FlagSet) {
	fs.DurationVar(&c.contextTTL, "context-ttl", contexts.DefaultTTL, "how long an idle context lives; every use extends it")
	fs.DurationVar(&c.cleanupInterval, "cleanup-interval", contexts.DefaultCleanupInterval, "period of the cleanup pass (expiry, orphans, pools)")
	fs.DurationVar(&c.auditRetention, "audit-retention", contexts.DefaultAuditRetention, "how long audit events are kept; the cleanup pass removes older ones (0: forever)")
	fs.DurationVar(&c.execTimeout, "exec-timeout", contexts.DefaultExecuteTimeout, "execution timeout of calls that give none")
	fs.DurationVar(&c.maxExecTimeout, "max-exec-timeout", contexts.DefaultMaxTimeout, "largest execution timeout a call may ask for; more is a 400")
	fs.Int64Var(&c.maxExecutions, "max-executions", contexts.DefaultMaxExecutions, "executions after which a context is rotated: ended, and the next call gets a fresh sandbox (-1: never)")
}

// serveFlags registers every flag of `sandlot serve`, the daemon's knobs
// that config.go also reads from the environment and the config file. A
// new knob is a flag added in one of these.
func (c *serveConfig) registerServe(fs *flag.FlagSet) {
	c.registerDaemon(fs, daemonDefaults{logLevel: "info", poolSize: -1, defaultImage: defaultImageDebian})
	c.registerHTTP(fs)
	c.network.register(fs)
	c.build.register(fs)
	c.desktop.register(fs)
}

// registerHTTP adds the flags of the HTTP front door (frontDoor): address,
// shutdown, admission, body pacing and the E2B wire. Only serve has it.
func (c *serveConfig) registerHTTP(fs *flag.FlagSet) {
	addr := os.Getenv("SANDLOT_ADDR")
	if addr == "" {
		addr = api.DefaultAddr
	}
	fs.StringVar(&c.addr, "addr", addr, "listen address, HOST:PORT ($SANDLOT_ADDR); loopback by default")
	fs.StringVar(&c.tlsAddr, "tls-addr", "", "also serve the front door over TLS on HOST:PORT (E2B's https://<port>-<sandboxId>.<domain> and envd by host name); needs --tls-cert and --tls-key")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate chain of --tls-addr: a wildcard for *.<ports domain> (and the API's name, if served there)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "on SIGTERM, how long in-flight requests may finish")
	fs.IntVar(&c.maxInFlight, "max-inflight", 0, "requests in flight at once, all callers (0: 1024; -1: unlimited); more answer 429 with Retry-After")
	fs.IntVar(&c.maxInFlightPerTenant, "max-inflight-per-tenant", 0, "requests in flight at once per tenant, open streams included (0: 64; -1: unlimited)")
	fs.DurationVar(&c.bodyReadTimeout, "body-read-timeout", 0, "time a request body may take to arrive, plus 1 s per 32 KiB (0: 30s); slower is a 408")
	fs.DurationVar(&c.e2bMaxTimeout, "e2b-max-timeout", 0, "largest E2B sandbox timeout a caller may ask for (0: 24h, E2B Pro's cap); more is a 400")
	fs.DurationVar(&c.e2bPausedTimeout, "e2b-paused-timeout", 0, "how long an E2B sandbox may stay paused (frozen, its memory kept) before it is killed (0: 7 days)")
	fs.BoolVar(&c.e2bInternet, "e2b-internet", false, "E2B creates get E2B's network defaults: open internet and public ports when they name neither allowInternetAccess nor network, public ports when network has no allowPublicTraffic (needs --network and a cap that allows mode open; otherwise sandlot's: no network, private ports)")
	fs.DurationVar(&c.e2bTokenTTL, "e2b-token-ttl", 0, "lifetime of E2B access tokens; connect hands out new ones (0: 24h)")
	fs.StringVar(&c.e2bInterpTemplate, "e2b-code-interpreter-template", "", "template E2B's default code-interpreter-v1 creates (\"\": default, small, no R or Java; code-interpreter: with R and Java, built on first use)")
	fs.StringVar(&c.e2bPython, "e2b-python", "ipython", "how the E2B code interpreter runs python cells: ipython (IPython's shell, as on E2B) or plain (the plain python kernel)")
}
