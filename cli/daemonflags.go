package cli

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/network/ports"
	"github.com/sandlot/sandlot/provider/e2b"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/tenant"
)

// daemonDefaults are the defaults in which serve and mcp differ: one MCP
// session needs one sandbox, keeps its own state dir and logs quietly to
// stderr beside the protocol.
type daemonDefaults struct {
	stateDir, logLevel string
	poolSize           int
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
	fs.StringVar(&c.StateDir, "state-dir", d.stateDir, stateHelp)
	fs.StringVar(&c.Runtime, "runtime", "auto", "OCI runtime: auto, crun, runc, runsc")
	fs.StringVar(&c.providers, "providers", "local", "sandbox providers in fallback order, comma-separated (local, e2b, kubernetes)")
	fs.StringVar(&c.logLevel, "log-level", d.logLevel, "debug, info, warn, error (logs go to stderr)")
	fs.IntVar(&c.MaxPerTenant, "max-contexts-per-tenant", 0, "active contexts per tenant (0: the manager default, 10)")
	fs.IntVar(&c.MaxPerConversation, "max-contexts-per-conversation", 0, "active contexts per conversation (0: the manager default, 5)")
	fs.Int64Var(&c.memoryMiB, "sandbox-memory", 0, "memory limit per sandbox in MiB (0: the provider default, 2048)")
	fs.Int64Var(&c.pids, "sandbox-pids", 0, "process limit per sandbox (0: the provider default, 256)")
	fs.Float64Var(&c.cpus, "sandbox-cpus", 0, "CPU quota per sandbox in cores (0: the provider default, 1)")
	fs.Int64Var(&c.diskMiB, "sandbox-disk", 0, "writable space per sandbox in MiB: the whole writable layer of an image template, each of /home/user and /tmp under the host template (0: the provider default, 512)")
	fs.StringVar(&c.Images.Dir, "images-dir", "", "image store of the local provider's templates (default DATA_DIR/images)")
	// serve and mcp run on the same default image, so a session sees the
	// environment the daemon's sandboxes have.
	fs.StringVar(&c.Images.Default, "default-image", daemon.DefaultImageDebian,
		"the default template: debian (built from the Debian mirror at first start, cached) or none (name an image \"default\" yourself)")
	fs.DurationVar(&c.Images.GCInterval, "image-gc-interval", daemon.DefaultImageGCInterval, "how often image layers that no template, named image or sandbox uses are removed (0: never)")
	fs.BoolVar(&c.Images.HostTemplate, "host-template", false, "also offer the template \"host\": the host's /usr read-only (without /usr/local), for hosts without images")
	poolHelp := "warm sandboxes kept per pool; on the local provider a template has one pool per kernel set it is asked for (/v1 with python, E2B with none), so default keeps twice this (-1: the manager default)"
	if d.poolSize == 0 {
		poolHelp = "warm sandboxes kept per pool (0: none)"
	}
	fs.IntVar(&c.PoolSize, "pool-size", d.poolSize, poolHelp)
	fs.Int64Var(&c.poolBudgetMiB, "pool-memory-budget", 0, "MiB the warm pools may hold when they grow ahead of a burst of creates, counting 16 MiB per warm sandbox (0: 256; -1: pools keep their size)")
	fs.Var((*poolSizes)(&c.PoolSizes), "pool-sizes", "warm sandboxes per pool of named templates, NAME=N,... (overrides --pool-size for them; 0 turns a template's pools off)")
	fs.IntVar(&c.MaxCreating, "max-creating", 0, "sandboxes being created at once by the local provider; more wait (0: the CPUs, at least 2)")
	fs.DurationVar(&c.CreateTimeout, "create-timeout", defaultCreateTimeout, "time a local sandbox may take from create to healthy (waiting for --max-creating not counted)")
	c.registerLifecycle(fs)
	registerE2BProvider(fs, &c.E2BProvider)
	registerKubernetes(fs, &c.Kubernetes)
	fs.StringVar(&c.guardMode, "guard-mode", tenant.GuardEnforce, "egress guard mode of the tenant created at first start: off, report, enforce (tenant create --guard-mode sets others')")
	fs.StringVar(&c.guardEntities, "guard-entities", "all", "entity types the egress guard finds in every tenant's output: all, none (the patterns alone) or a list of PERSON,ADDRESS,ORGANIZATION,LOCATION,DATE_OF_BIRTH")
	fs.BoolVar(&c.bootstrapAdmin, "bootstrap-admin", false, "on first start, make the default tenant an admin (may switch the guard off per request)")
	fs.StringVar(&c.MetricPrefix, "telemetry-prefix", telemetry.DefaultPrefix, "application prefix of metric names (sandlot.executions)")
	fs.StringVar(&c.SpanPrefix, "telemetry-span-prefix", "", "application prefix of span names (default none: execution_context.get_or_create)")
	fs.StringVar((*string)(&c.TelemetryNames), "telemetry-names", string(telemetry.NamesSandlot),
		"names of spans and metrics: sandlot (sandlot.executions, tool.run_code) or spec, the specifications' exactly where they name one (execution_context.executions.total, compliance.tool.run_code; no span prefix)")
	fs.StringVar(&c.Node, "node", "", "this daemon's node id in a store shared with other daemons ($"+envNode+
		"; default: one kept in DATA/nodes/ per state dir, so a restart keeps it)")
}

// registerLifecycle adds the flags of the context manager's lifecycle
// (contexts.Config).
func (c *serveConfig) registerLifecycle(fs *flag.FlagSet) {
	fs.DurationVar(&c.ContextTTL, "context-ttl", contexts.DefaultTTL, "how long an idle context lives; every use extends it")
	fs.DurationVar(&c.CleanupInterval, "cleanup-interval", contexts.DefaultCleanupInterval, "period of the cleanup pass (expiry, orphans, pools)")
	fs.BoolVar(&c.SuspendMemory, "suspend-memory", true, "on runsc with the state dir on a disk, a suspend keeps the kernels' memory (a checkpoint in the sandbox's bundle; docs/state.md); false: a suspend keeps the files only")
	fs.DurationVar(&c.IdleSuspend, "idle-suspend", 0, "suspend to disk the contexts idle this long (files kept, memory freed, woken by the next call; docs/state.md); 0: never")
	fs.DurationVar(&c.auditRetention, "audit-retention", contexts.DefaultAuditRetention, "how long audit events are kept; the cleanup pass removes older ones (0: forever)")
	fs.DurationVar(&c.ExecTimeout, "exec-timeout", contexts.DefaultExecuteTimeout, "execution timeout of calls that give none")
	fs.DurationVar(&c.MaxExecTimeout, "max-exec-timeout", contexts.DefaultMaxTimeout, "largest execution timeout a call may ask for; more is a 400")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", contexts.DefaultLeaseTTL, "with a shared provider (kubernetes), how long the cleanup lease lasts: another replica takes the cleanup over at most this long after its holder died; renewed every third of it")
	fs.Int64Var(&c.MaxExecutions, "max-executions", contexts.DefaultMaxExecutions, "executions after which a context is rotated: ended, and the next call gets a fresh sandbox (-1: never)")
}

// serveFlags registers every flag of `sandlot serve`, the daemon's knobs
// that config.go also reads from the environment and the config file. A
// new knob is a flag added in one of these.
func (c *serveConfig) registerServe(fs *flag.FlagSet) {
	c.registerDaemon(fs, daemonDefaults{logLevel: "info", poolSize: -1})
	c.registerHTTP(fs)
	registerNetwork(fs, &c.Network)
	registerBuild(fs, &c.Build)
	registerDesktop(fs, &c.Desktop)
}

// registerHTTP adds the flags of the HTTP front door: address,
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
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", daemon.DefaultShutdownTimeout, "on SIGTERM, how long in-flight requests may finish")
	fs.IntVar(&c.MaxInFlight, "max-inflight", 0, "requests in flight at once, all callers (0: 1024; -1: unlimited); more answer 429 with Retry-After")
	fs.IntVar(&c.MaxInFlightPerTenant, "max-inflight-per-tenant", 0, "requests in flight at once per tenant, open streams included (0: 64; -1: unlimited)")
	fs.DurationVar(&c.BodyReadTimeout, "body-read-timeout", 0, "time a request body may take to arrive, plus 1 s per 32 KiB (0: 30s); slower is a 408")
	fs.DurationVar(&c.E2B.MaxTimeout, "e2b-max-timeout", 0, "largest E2B sandbox timeout a caller may ask for (0: 24h, E2B Pro's cap); more is a 400")
	fs.DurationVar(&c.E2B.PausedTimeout, "e2b-paused-timeout", 0, "how long an E2B sandbox may stay paused (frozen, its memory kept) before it is killed (0: 7 days)")
	fs.BoolVar(&c.E2B.Internet, "e2b-internet", false, "E2B creates that name neither allowInternetAccess nor network get E2B's default, open internet and public ports (needs --network and a cap that allows mode open; otherwise sandlot's: no network)")
	fs.DurationVar(&c.E2B.TokenTTL, "e2b-token-ttl", 0, "lifetime of E2B access tokens; connect hands out new ones (0: 24h)")
	fs.StringVar(&c.E2B.InterpTemplate, "e2b-code-interpreter-template", "", "template E2B's default code-interpreter-v1 creates (\"\": default, small, no R or Java; code-interpreter: with R and Java, built on first use)")
	fs.StringVar(&c.E2B.Python, "e2b-python", "ipython", "how the E2B code interpreter runs python cells: ipython (IPython's shell, as on E2B) or plain (the plain python kernel)")
}

// The environment variables of the daemon that are no flag's
// $SANDLOT_<NAME>, or that the help names.
const (
	// envSecretsKey carries the store's secrets key itself, base64, for
	// deployments that pass keys through the environment
	// (daemon.SecretsKey).
	envSecretsKey = "SANDLOT_SECRETS_KEY"
	// envNode names the daemon's node (--node) in a fleet.
	envNode = "SANDLOT_NODE"
)

// registerKubernetes adds the settings of the "kubernetes" provider
// (docs/kubernetes-provider.md). Its warm pools are --pool-sizes (and --pool-size
// for the default template), kept by agent-sandbox.
func registerKubernetes(fs *flag.FlagSet, k *daemon.Kubernetes) {
	fs.StringVar(&k.Kubeconfig, "kube-config", "", "kubeconfig file of the kubernetes provider's cluster (default: the in-cluster configuration, the pod's service account)")
	fs.StringVar(&k.Namespace, "kube-namespace", "", "namespace of the kubernetes provider's objects: Sandboxes, SandboxTemplates, SandboxWarmPools, SandboxClaims, key Secrets, the NetworkPolicy (default: default)")
	fs.StringVar(&k.RuntimeClass, "kube-runtime-class", "none", "runtimeClassName of sandbox pods: gvisor, kata or none (the cluster's default runtime)")
	fs.StringVar(&k.Registry, "kube-registry", "", "registry prefix of the templates' pod images: a template's is PREFIX/TEMPLATE:latest (sandlot template push)")
	fs.Var((*templateImages)(&k.Images), "kube-images", "pod images of named templates, NAME=REF,... (overrides --kube-registry for them); desktop=REF offers the desktop template on Kubernetes")
	fs.StringVar(&k.EgressProxy, "kube-egress-proxy", "", "HOST:PORT of the egress proxy, the one address sandbox pods may reach (default: none, they reach nothing)")
	fs.StringVar(&k.EgressListen, "kube-egress-listen", "", "ADDR:PORT the sandbox pods' egress proxy listens on (default: every address, on --kube-egress-proxy's port)")
	fs.DurationVar(&k.CreateTimeout, "kube-create-timeout", 0, "time a kubernetes sandbox may take from claim to connected agent (0: 2m; a cold pod may pull its image)")
}

// registerE2BProvider adds the settings of the "e2b" provider and of its
// account's plan limits. Like every daemon knob each is a flag,
// $SANDLOT_<NAME> and a config key; the account itself is configured as
// the E2B SDKs are, by E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL and
// E2B_DOMAIN (load reads them), so an API key never appears on a command
// line.
func registerE2BProvider(fs *flag.FlagSet, f *daemon.E2BProvider) {
	fs.StringVar(&f.Template, "e2b-template", "", "E2B template of the e2b provider's sandboxes when a call names none (default: "+e2b.DefaultTemplate+", E2B's code interpreter, which run_code needs)")
	fs.StringVar(&f.Deployment, "e2b-deployment", "", "label of the e2b provider's sandboxes: it lists and sweeps only its own (default: the node id)")
	fs.DurationVar(&f.ConnectTimeout, "e2b-connect-timeout", 0, "time the e2b provider waits for a new sandbox's envd (0: the provider default, "+e2b.DefaultConnectTimeout.String()+")")
	fs.StringVar(&f.Sizes, "e2b-sizes", "", "E2B templates by resources, TEMPLATE:CPUS:MEMORY_MB,...: a sandbox asking for limits gets the smallest that fits")
	fs.Int64Var(&f.PlanCreations, "e2b-plan-creations", 0, "sandbox creations the E2B account's plan allows (0: not tracked); warnings at the --quota-thresholds")
	fs.Float64Var(&f.PlanComputeMinutes, "e2b-plan-compute-minutes", 0, "sandbox wall-clock minutes the E2B account's plan allows (0: not tracked)")
	fs.StringVar(&f.QuotaThresholds, "quota-thresholds", "", "used shares of a plan limit that log a warning, comma-separated fractions (default 0.8,1)")
}

// registerNetwork adds the flags of sandbox networks (docs/network.md).
// Off by default: the daemon then never touches the host's network, and
// every sandbox has loopback only.
func registerNetwork(fs *flag.FlagSet, f *daemon.Network) {
	fs.BoolVar(&f.Enabled, "network", false, "give sandboxes that ask for one a network of their own (egress proxy, resolver, ports); needs root and nftables; one daemon per host (a second is refused at start)")
	fs.StringVar(&f.PolicyFile, "network-policy", "", "operator network policy, JSON {\"default\": cap, \"tenants\": {id: cap}} (docs/network.md); flags below set the default cap when it is not given")
	fs.BoolVar(&f.AllowOpen, "network-allow-open", false, "tenants may ask for mode open (every public destination)")
	fs.StringVar(&f.Reachable, "network-reachable", "", "internal ranges tenants' allow rules may open, comma-separated CIDRs (default: none)")
	fs.StringVar(&f.Pool, "network-pool", "", "IPv4 range of sandbox addresses (default 10.254.0.0/16; must not overlap what the host reaches)")
	fs.IntVar(&f.Spares, "network-spares", 4, "sandbox networks kept built ahead of need (cold create cost)")
	fs.StringVar(&f.Domain, "ports-domain", ports.DefaultDomain, "domain of sandbox ports served by the listener: <port>-<sandboxId>.<domain>")
	fs.StringVar(&f.Upstream, "network-upstream", "", "name servers the sandboxes' resolver asks, comma-separated ip:port (default: the host's /etc/resolv.conf)")
	fs.IntVar(&f.Limits.PerSandbox, "network-fds-per-sandbox", 0, "descriptors the egress proxy holds for one sandbox, two per connection (default 1024, or the tenant's bound when lower)")
	fs.IntVar(&f.Limits.PerTenant, "network-fds-per-tenant", 0, "descriptors the egress proxy holds for all of one tenant's sandboxes (default a quarter of --network-fds)")
	fs.IntVar(&f.Limits.Total, "network-fds", 0, "descriptors the egress proxy holds in all (default half the daemon's open-files limit, at most 8192)")
	fs.IntVar(&f.Limits.Watermark, "network-fd-watermark", 0, "the egress proxy refuses new connections while the daemon holds this many descriptors (default 7/8 of its open-files limit)")
	fs.DurationVar(&f.PortsTimeout, "ports-response-timeout", ports.DefaultResponseTimeout, "how long the ports route waits for a sandbox's server to answer a request")
}

// registerBuild adds the flags of template builds (docs/images-builds.md, Builds).
func registerBuild(fs *flag.FlagSet, f *daemon.Build) {
	fs.StringVar(&f.Allow, "build-allow", strings.Join(local.DefaultBuildAllow, ","),
		`what a build's RUN steps may reach, comma-separated allowlist rules (needs --network; "none": no network)`)
	fs.BoolVar(&f.Pull, "build-pull", false, "a build's FROM may pull an image the store lacks from its registry (on the public internet, or a --pull-allow-cidr range)")
	fs.Var((*cidrList)(&f.PullAllow), "pull-allow-cidr", "address ranges a tenant's template pull (and a build's FROM pull) may connect to besides the public internet, comma-separated or repeated; loopback, private, link-local, CGNAT, metadata and the host's own addresses are refused otherwise (metadata and host addresses open only when listed as single addresses)")
}

// registerDesktop adds the flags of desktop sandboxes (docs/desktop.md).
func registerDesktop(fs *flag.FlagSet, f *daemon.Desktop) {
	fs.StringVar(&f.Template, "desktop-template", daemon.DesktopFirstUse,
		"the built-in \"desktop\" template (Xvfb, XFCE, Chromium, noVNC): first-use (built from the Debian mirror when first asked for, cached), start (built at start), off")
	fs.DurationVar(&f.TTL, "desktop-ttl", desktop.DefaultTTL, "a desktop session (the desktop tools') ends this long after its last call")
	fs.DurationVar(&f.StreamWait, "desktop-stream-wait", desktop.DefaultStreamWait, "how long opening a desktop session waits for its live view's stream")
}

// cidrList is a repeatable flag of address ranges, each value one or
// more comma-separated CIDRs (or single addresses).
type cidrList []netip.Prefix

func (l *cidrList) String() string {
	var parts []string
	for _, p := range *l {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

func (l *cidrList) Type() string { return "CIDR,..." }

func (l *cidrList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("%q is not a CIDR range or an address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		*l = append(*l, p.Masked())
	}
	return nil
}
