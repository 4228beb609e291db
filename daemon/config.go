package daemon

import (
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/network/egress"
	"github.com/sandlot/sandlot/telemetry"
)

// Config is everything the daemon is told, as plain values. `sandlot serve`
// and `sandlot mcp` fill it from their flags, $SANDLOT_<NAME> and the config
// file (cli/daemonflags.go binds each flag to its field; the errors of a
// value that does not parse name the flag); tests and the bench fill it
// directly. The zero value of every field is documented, and is what a
// test that leaves it out gets.
type Config struct {
	// DataDir holds the daemon's own files: the keys and tokens made at
	// first start, node ids, network state, the e2b quota's counts and,
	// unless Images.Dir says otherwise, the image store.
	DataDir string
	// StateDir is the local provider's runtime state (bundles, agent
	// sockets), held by one daemon at a time (LockStateDir). "":
	// oci.DefaultStateDir.
	StateDir string
	// Node is this daemon's node id in a store shared with other daemons.
	// "": the one kept in DATA/nodes/ for StateDir, made on first start.
	Node string
	// LeaseTTL is the cluster lease's (contexts.Config.LeaseTTL): with a
	// shared provider, how long after a replica dies another takes its
	// cleanup over at most. Zero: 30 s.
	LeaseTTL time.Duration
	// Logger receives the daemon's logs; nil discards.
	Logger *slog.Logger
	// Version is the version reported to MCP clients (serverInfo), the
	// landing page and /v1/version; "": the build's own (BuildVersion).
	Version string
	// GuardEntities are the entity types the egress guard scans every
	// tenant's output for (guard.EntityTypes); nil: all, empty: none (the
	// patterns alone).
	GuardEntities []string

	// Runtime is the local provider's OCI runtime: crun, runc or runsc;
	// "" or "auto" picks one.
	Runtime string
	// Providers are the sandbox providers in fallback order (local, e2b,
	// kubernetes). Empty: local.
	Providers []string
	// Limits bound each sandbox; zero fields keep the provider's defaults.
	Limits contexts.Limits
	// CreateTimeout bounds a local sandbox's create to healthy (waiting
	// for MaxCreating not counted); 0: the provider's default.
	CreateTimeout time.Duration
	// MaxCreating bounds the local sandboxes created at once; 0: the
	// provider's default (the CPUs, at least 2).
	MaxCreating int
	// Images is the local provider's image store and default template.
	Images Images
	// E2BProvider configures the "e2b" provider when Providers names it.
	E2BProvider E2BProvider
	// Kubernetes configures the "kubernetes" provider when Providers
	// names it.
	Kubernetes Kubernetes

	// The context manager's lifecycle (contexts.Config); zero keeps the
	// manager's defaults.
	ContextTTL      time.Duration
	CleanupInterval time.Duration
	// IdleSuspend suspends to disk the contexts idle that long
	// (contexts.Config.IdleSuspend); 0: never.
	IdleSuspend time.Duration
	// SuspendMemory lets a suspend keep the kernels' memory where the
	// runtime can (runsc with the state dir on a disk; local.Config
	// NoMemory when false). On by serve's default (--suspend-memory);
	// false keeps a suspend to the sandbox's files.
	SuspendMemory bool
	// AuditRetention is how long audit events are kept; the cleanup pass
	// removes older ones (contexts.Config.AuditRetention: 0 is 30 days,
	// negative keeps them forever).
	AuditRetention     time.Duration
	ExecTimeout        time.Duration // contexts.Config.DefaultTimeout
	MaxExecTimeout     time.Duration // contexts.Config.MaxTimeout
	MaxPerTenant       int
	MaxPerConversation int
	// MaxExecutions rotates a context after this many executions; 0: the
	// manager's default; -1: never.
	MaxExecutions int64
	// PoolSize is the warm sandboxes kept per pool: 0 none, -1 the
	// manager's default. PoolSizes overrides it by template name. A
	// template may keep more than one pool of this size: on the local
	// provider the default template keeps two, one with python prestarted
	// (/v1's creates) and one starting no kernel (E2B's base sandbox;
	// contexts.Config.PoolWarmKernels).
	PoolSize  int
	PoolSizes map[string]int
	// PoolMemoryBudget bounds what the warm pools hold when they grow
	// ahead of a burst of creates (contexts.Config.PoolMemoryBudget: 0 is
	// 256 MiB, negative keeps each pool at its size).
	PoolMemoryBudget int64

	// MetricPrefix and SpanPrefix name the daemon's metrics and spans,
	// and TelemetryNames picks sandlot's names or the specifications'
	// (telemetry.SetNaming); "": sandlot's metric names, no span prefix,
	// sandlot's names.
	MetricPrefix   string
	SpanPrefix     string
	TelemetryNames telemetry.Names

	// Stdio builds the daemon of one `sandlot mcp` session, whose MCP
	// speaks on stdio: it has no HTTP front door, so neither the E2B
	// secret nor the metrics token is made, Handler is nil and Serve
	// fails. The fields below are the front door's.
	Stdio bool
	// ShutdownTimeout bounds how long Serve lets requests in flight finish
	// after its context ends; 0: DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// BodyReadTimeout bounds the arrival of a request body, plus 1 s per
	// 32 KiB; slower is a 408. 0: 30 s.
	BodyReadTimeout time.Duration
	// MaxInFlight and MaxInFlightPerTenant bound the requests in flight,
	// in all and per tenant, on every surface; 0: the defaults
	// (DefaultMaxInFlight, DefaultMaxInFlightPerTenant); -1: unlimited.
	MaxInFlight          int
	MaxInFlightPerTenant int
	// E2B configures the E2B wire.
	E2B E2B
	// Network configures sandbox networks; off in the zero value.
	Network Network
	// Build configures template builds.
	Build Build
	// Desktop configures the built-in desktop template; off in the zero
	// value.
	Desktop Desktop
}

// The default template (Images.Default).
const (
	DefaultImageDebian = "debian" // the Debian base, built from the mirror at first start
	DefaultImageNone   = "none"   // the operator names an image "default" (pull, import, build)
)

// DefaultImageGCInterval is how often `sandlot serve` collects unused
// image layers unless told otherwise.
const DefaultImageGCInterval = time.Hour

// Images configures the local provider's templates.
type Images struct {
	// Dir is the image store; "": DATA/images.
	Dir string
	// Default is the default template's image: DefaultImageDebian or
	// DefaultImageNone. "": every sandbox runs on the host template (the
	// host's /usr read-only), as before images, and there is no image
	// store, catalog or build queue.
	Default string
	// HostTemplate also offers the template "host" beside the images.
	HostTemplate bool
	// GCInterval schedules the image GC; 0: never.
	GCInterval time.Duration
}

// E2BProvider configures the "e2b" provider: the E2B account (as E2B's
// SDKs name it: E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN) and
// its plan's limits.
type E2BProvider struct {
	APIKey, APIURL, SandboxURL, Domain string
	// Template is the template of sandboxes whose call names none; "":
	// E2B's base.
	Template string
	// Deployment labels the provider's sandboxes, so it lists and sweeps
	// only its own; "": the node id.
	Deployment string
	// ConnectTimeout bounds the wait for a new sandbox's envd; 0: the
	// provider's default.
	ConnectTimeout time.Duration
	// Sizes maps resources to templates, TEMPLATE:CPUS:MEMORY_MB,...
	Sizes string
	// PlanCreations and PlanComputeMinutes are the plan's limits (0: not
	// tracked); QuotaThresholds the used shares that log a warning,
	// comma-separated fractions ("": 0.8,1).
	PlanCreations      int64
	PlanComputeMinutes float64
	QuotaThresholds    string
}

// Kubernetes configures the "kubernetes" provider (docs/kubernetes-provider.md,
// "The kubernetes provider"). Its warm pools are PoolSizes (PoolSize, when
// positive, for the default template): agent-sandbox's SandboxWarmPools
// keep them, and the manager keeps none of its own while kubernetes is the
// first provider.
type Kubernetes struct {
	// Kubeconfig is the path of a kubeconfig file; "": the in-cluster
	// configuration (the pod's service account).
	Kubeconfig string
	// Namespace holds the sandboxes' objects; "": default.
	Namespace string
	// RuntimeClass is the sandbox pods' runtimeClassName: gvisor, kata or
	// none ("": none).
	RuntimeClass string
	// Registry prefixes the templates' pod images, REGISTRY/TEMPLATE:latest.
	Registry string
	// Images names a template's pod image when it is not the Registry's.
	Images map[string]string
	// EgressProxy is the egress proxy's host:port, the one address sandbox
	// pods may reach; "": they reach nothing.
	EgressProxy string
	// EgressKey makes the pods' proxy credentials (EgressKey of the
	// secrets key, the same on every replica); with EgressProxy, the
	// daemon serves the pods' egress proxy on EgressListen and gives them
	// allowlists, secrets and header rules. nil: modes none and open only.
	EgressKey []byte
	// EgressListen is where the pods' egress proxy listens; "": every
	// address, on EgressProxy's port.
	EgressListen string
	// CreateTimeout bounds a create from claim to connected agent; 0: the
	// provider's default (2 minutes: a cold pod may pull its image).
	CreateTimeout time.Duration
}

// E2B configures the E2B wire (api/e2bcompat).
type E2B struct {
	// MaxTimeout is the largest sandbox timeout a caller may ask for; 0:
	// 24 h.
	MaxTimeout time.Duration
	// TokenTTL is the lifetime of access tokens; 0: 24 h.
	TokenTTL time.Duration
	// PausedTimeout is how long a sandbox may stay paused; 0: 7 days.
	PausedTimeout time.Duration
	// InterpTemplate is the template E2B's code-interpreter-v1 creates;
	// "": the default template.
	InterpTemplate string
	// Internet gives creates E2B's network defaults (open internet,
	// public ports) within the operator's caps; needs Network.
	Internet bool
	// Python is how the code interpreter runs python cells: "ipython"
	// ("" too) or "plain".
	Python string
}

// Network configures sandbox networks (docs/network.md).
type Network struct {
	// Enabled gives sandboxes that ask for one a network of their own;
	// needs root and nftables. Off: the daemon never touches the host's
	// network, and the fields below only cap policies (PolicyFile,
	// AllowOpen, Reachable) for the e2b provider.
	Enabled bool
	// PolicyFile is the operator policy, JSON; when set, AllowOpen and
	// Reachable are not read.
	PolicyFile string
	// AllowOpen lets tenants ask for mode open.
	AllowOpen bool
	// Reachable lists the internal ranges tenants' allow rules may open,
	// comma-separated CIDRs.
	Reachable string
	// Pool is the IPv4 range of sandbox addresses; "": network's default.
	Pool string
	// Spares is how many networks are kept built ahead of need.
	Spares int
	// Domain is the domain of sandbox ports on the front door; "":
	// ports.DefaultDomain.
	Domain string
	// Upstream lists the name servers the sandboxes' resolver asks,
	// comma-separated ip:port; "": the host's /etc/resolv.conf.
	Upstream string
	// Limits bound the egress proxy's descriptors, per sandbox, per
	// tenant and in all (egress.Limits; zero fields: derived from the
	// daemon's open-files limit).
	Limits egress.Limits
	// PortsTimeout is how long the ports route waits for a sandbox's
	// server to answer; 0: ports.DefaultResponseTimeout.
	PortsTimeout time.Duration
}

// Build configures template builds (docs/images-builds.md, Builds).
type Build struct {
	// Allow is what a build's RUN steps may reach, comma-separated
	// allowlist rules; "" or "none": no network (also without
	// Network.Enabled).
	Allow string
	// Pull lets a build's FROM pull an image the store lacks.
	Pull bool
	// PullAllow lists the ranges tenants' pulls may reach besides the
	// public internet.
	PullAllow []netip.Prefix
}

// The desktop template's modes (Desktop.Template).
const (
	DesktopFirstUse = "first-use" // built from Debian's mirror when first asked for, cached
	DesktopStart    = "start"     // built at the daemon's start when not cached
	DesktopOff      = "off"       // not offered
)

// Desktop configures desktop sandboxes (docs/desktop.md).
type Desktop struct {
	// Template is DesktopFirstUse, DesktopStart or DesktopOff; "": off.
	Template string
	// TTL ends a desktop session this long after its last call;
	// StreamWait bounds the wait for its live view's stream. 0: desktop's
	// defaults.
	TTL        time.Duration
	StreamWait time.Duration
}

// providers is Providers with the names trimmed; local when empty.
func (c Config) providers() []string {
	if len(c.Providers) == 0 {
		return []string{"local"}
	}
	out := make([]string, len(c.Providers))
	for i, p := range c.Providers {
		out[i] = strings.TrimSpace(p)
	}
	return out
}

// uses reports whether the daemon runs the provider named name.
func (c Config) uses(name string) bool { return slices.Contains(c.providers(), name) }
