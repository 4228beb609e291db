package contexts

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sandlot/sandlot/telemetry"
)

// Config tunes a Manager. Every zero value means the documented default, so
// Config{} is a working configuration.
type Config struct {
	// TTL is how long an idle context lives; every use extends expiresAt to
	// now + TTL. Zero: 30 minutes. CreateOptions.TTL overrides it per context.
	TTL time.Duration
	// DefaultTimeout applies to Execute calls without a timeout. Zero: 60 s.
	DefaultTimeout time.Duration
	// MinTimeout and MaxTimeout bound ExecuteRequest.Timeout; a timeout
	// outside them is invalid_argument. Zero: 1 s and 600 s.
	MinTimeout time.Duration
	MaxTimeout time.Duration
	// MaxCodeBytes bounds ExecuteRequest.Code. Zero: 100 KB (102400 bytes).
	MaxCodeBytes int
	// MaxPerTenant and MaxPerConversation bound active contexts; hitting
	// them is resource_exhausted. Zero: 10 and 5. Negative: unlimited.
	MaxPerTenant       int
	MaxPerConversation int
	// MaxExecutionsPerContext rotates a context: the call that brings its
	// count to this number is answered, then the context is terminated with
	// reason rotated and the next call gets a fresh sandbox. Zero: 100.
	// Negative: never rotate. CreateOptions.MaxExecutions overrides it per
	// context.
	MaxExecutionsPerContext int64
	// CleanupInterval is the period of the cleanup loop. Zero: 60 s.
	CleanupInterval time.Duration
	// IdleSuspend, when positive, suspends to disk (Suspend) every ready
	// context this manager serves that no call has used for that long:
	// the cleanup pass does it, so within CleanupInterval after. Zero:
	// never. A provider that cannot capture (CapSnapshot), or a manager
	// without an image keeper (Catalog), never suspends.
	IdleSuspend time.Duration
	// IdleSuspendOf, when set, is the idle suspend a context's template
	// and tenant ask for (the smaller of their settings that are set; 0:
	// neither is): a context is suspended after the smallest of that and
	// IdleSuspend, so a template or a tenant can shorten the daemon's
	// value, or ask for one where the daemon has none. The cleanup pass
	// asks it once per tenant and template.
	IdleSuspendOf func(ctx context.Context, tenantID, template string) time.Duration
	// Volumes says which volumes a context mounts (volumes.Service): a
	// wake from suspension to disk mounts them again. nil: no context has
	// volumes.
	Volumes VolumeLister
	// AuditRetention is how long audit events are kept: each cleanup pass
	// removes older ones when the store can (AuditPruner). Zero: 30 days.
	// Negative: kept forever.
	AuditRetention time.Duration
	// CreatingTimeout is how long a record may stay in creating before the
	// cleanup loop treats it as an orphan. Zero: 2 minutes.
	CreatingTimeout time.Duration
	// HealthCheckTimeout bounds the ping done on every reuse. Zero: 2 s.
	HealthCheckTimeout time.Duration
	// HealthCheckInterval lets a reuse skip the ping when the sandbox
	// answered a call (or a ping) less than this long ago and its
	// connection is still open: that answer counts as the passed health
	// check. Only sandboxes whose connection reports its closing (a
	// Done() <-chan struct{} method, as *agent.Client has) qualify; others
	// are pinged every time. Zero or negative: ping on every reuse, so a
	// sandbox killed just before a call is always replaced transparently;
	// a positive interval trades that (the call fails, the next one gets a
	// fresh sandbox) for ~45 µs per warm call.
	HealthCheckInterval time.Duration
	// PoolSize is the number of warm sandboxes kept per template. Zero: 2.
	// Negative: no pool. PoolSizes overrides it per template (a value <= 0
	// there disables that template's pool). The default template and every
	// template named in PoolSizes are warmed at Start; other templates get
	// a pool after their first successful creation.
	PoolSize  int
	PoolSizes map[string]int
	// PoolSpecs says, per template, how its warm sandboxes differ from a
	// plain one (network, environment, a warm-up such as a started
	// desktop) and their default number; nil: plain.
	PoolSpecs map[string]PoolSpec
	// PoolMemoryBudget bounds what the warm pools may hold when they grow
	// past their sizes ahead of a burst of creates (a pool keeps as many
	// warm sandboxes as were taken in about the last second): counted as
	// PoolSandboxBytes per warm sandbox, over all pools. Zero: 256 MiB.
	// Negative: pools never grow past their sizes.
	PoolMemoryBudget int64
	// PoolSandboxBytes is what one idle warm sandbox is taken to hold
	// against PoolMemoryBudget. Zero: 16 MiB (an idle sandbox with its
	// python kernel up measured 7-9 MiB PSS, 8 MiB of cgroup memory).
	PoolSandboxBytes int64
	// PoolPrestart names the kernels a pooled sandbox starts at boot, so
	// the first call of a context served from the pool does not wait for
	// an interpreter (about 30 ms for python). Nil: python. Empty: none.
	// Passed to the provider as Spec.Prestart. A template's
	// PoolSpec.Prestart replaces it for that template's own pool, and a
	// pool of PoolWarmKernels starts its own set.
	PoolPrestart []string
	// PoolWarmKernels are the kernel sets a create may ask its warm
	// sandbox to have started (CreateOptions.WarmKernels) other than its
	// template's own (PoolSpec.Prestart, PoolPrestart): a pooled template
	// keeps a pool of each beside its own, of the same size, the default
	// template's warmed at Start, another's made when a create first asks.
	// A create asking for a set not named here takes from the template's
	// own pool. The daemon names E2B's base sandbox's (none) on the local
	// provider. Empty: one pool per template.
	PoolWarmKernels [][]string
	// DefaultTemplate is used when CreateOptions.Template is empty.
	// Zero: "default".
	DefaultTemplate string
	// Templates are the template names the provider can start; creating a
	// context with any other is not_found ("template NAME not found").
	// Empty: DefaultTemplate and the keys of PoolSizes. The local provider
	// has one template, "default" (python, node and bash kernels).
	Templates []string
	// Catalog, when set, says what a template name means per tenant: a
	// create resolves CreateOptions.Template through it and the record
	// (and the pool, and the provider's Spec) carries the template's id,
	// so two tenants' templates of one name never share a sandbox; a run
	// in a language the template does not offer is invalid_argument.
	// It replaces Templates. PoolSizes keys may be names of public
	// templates (resolved at Start) or ids; a tenant's own template has a
	// pool only when PoolSizes names its id.
	Catalog Catalog
	// Limits are passed to the provider for every sandbox.
	Limits Limits
	// Guard redacts everything that leaves a sandbox. Nil passes
	// everything through (tests only).
	Guard Guard
	// Clock returns the current time. Nil: time.Now. Tests inject one to
	// drive expiry.
	Clock func() time.Time
	// Logger receives the manager's logs. Nil: discarded.
	Logger *slog.Logger
	// Networks checks the network policies contexts ask for and changes
	// them (UpdateNetwork). Nil: policies go to the provider unchecked
	// and cannot be changed.
	Networks Networks
	// OnTerminated, when set, is told of every termination this manager
	// wins, whatever its path (a call, path events, idle expiry, rotation,
	// a failed health check or create, a lost sandbox, reconcile): serve
	// appends each to the audit trail. It runs on the terminating
	// goroutine and must not block for long. Manager.OnTerminated adds
	// more observers after the manager is built.
	OnTerminated func(ctx context.Context, ev Termination)
	// Meter makes the manager's metric instruments (see metrics.go).
	// Nil: telemetry.Meter(), the global provider's, which records once
	// telemetry/export has installed the SDK.
	Meter metric.Meter
	// Node names this manager in the store (at most 128 bytes): every
	// record it creates carries it, its reconcile and cleanup touch only
	// its own records (and those of nodes whose lease lapsed), and a call
	// for a context another live node owns is refused with unavailable,
	// naming that node. Managers that share a store must each have their
	// own Node; sandlot serve and sandlot mcp do (docs/contexts-nodes.md,
	// "Nodes"). Zero: "", the unnamed node of a store with one manager: it
	// renews no lease and takes nothing over.
	Node string
	// NodeLease is how long a heartbeat keeps a node's contexts its own;
	// the manager renews its lease every NodeLease/4 from Start on. Once a
	// node's lease has lapsed, other nodes expire its contexts when they
	// expire and take over any a call names. It must exceed the clock
	// skew between the daemons' hosts. Zero: 1 minute.
	NodeLease time.Duration
	// LeaseTTL is how long the cluster lease lasts once taken or renewed;
	// it matters only with a shared provider (CapShared) and a named
	// Node. Its holder renews it every LeaseTTL/3 and stops the cluster's
	// work (expiry, lost records, the sweep, the warm pool) at LeaseTTL
	// after the start of its last renewal that succeeded, less 1%, before
	// the store lets another node take it; a holder killed without Close
	// hands the work over after at most LeaseTTL. The store's clock
	// judges it, so hosts' clocks need not agree. Zero: 30 s.
	LeaseTTL time.Duration
	// ForkGrace is how old a fork's template must be before the cleanup
	// pass may delete it when no context runs on it (forkdrop.go): it
	// covers the moment between the template's row and its first
	// context's, or its lease, on another node. Zero: 2 minutes.
	ForkGrace time.Duration
}

// Defaults.
const (
	DefaultTTL                = 30 * time.Minute
	DefaultExecuteTimeout     = 60 * time.Second
	DefaultMinTimeout         = time.Second
	DefaultMaxTimeout         = 600 * time.Second
	DefaultMaxCodeBytes       = 100 * 1024
	DefaultMaxPerTenant       = 10
	DefaultMaxPerConversation = 5
	DefaultMaxExecutions      = 100
	DefaultCleanupInterval    = 60 * time.Second
	DefaultAuditRetention     = 30 * 24 * time.Hour
	DefaultCreatingTimeout    = 2 * time.Minute
	DefaultHealthCheckTimeout = 2 * time.Second
	DefaultPoolSize           = 2
	DefaultPoolMemoryBudget   = 256 << 20
	DefaultPoolSandboxBytes   = 16 << 20
	DefaultTemplate           = "default"
	DefaultNodeLease          = time.Minute
	DefaultLeaseTTL           = 30 * time.Second
	DefaultForkGrace          = 2 * time.Minute
)

// withDefaults returns c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	setDur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setDur(&c.TTL, DefaultTTL)
	setDur(&c.DefaultTimeout, DefaultExecuteTimeout)
	setDur(&c.MinTimeout, DefaultMinTimeout)
	setDur(&c.MaxTimeout, DefaultMaxTimeout)
	setDur(&c.CleanupInterval, DefaultCleanupInterval)
	setDur(&c.AuditRetention, DefaultAuditRetention)
	setDur(&c.CreatingTimeout, DefaultCreatingTimeout)
	setDur(&c.HealthCheckTimeout, DefaultHealthCheckTimeout)
	setDur(&c.NodeLease, DefaultNodeLease)
	setDur(&c.LeaseTTL, DefaultLeaseTTL)
	setDur(&c.ForkGrace, DefaultForkGrace)
	if c.MaxCodeBytes == 0 {
		c.MaxCodeBytes = DefaultMaxCodeBytes
	}
	if c.MaxPerTenant == 0 {
		c.MaxPerTenant = DefaultMaxPerTenant
	}
	if c.MaxPerConversation == 0 {
		c.MaxPerConversation = DefaultMaxPerConversation
	}
	if c.MaxExecutionsPerContext == 0 {
		c.MaxExecutionsPerContext = DefaultMaxExecutions
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	if c.PoolMemoryBudget == 0 {
		c.PoolMemoryBudget = DefaultPoolMemoryBudget
	}
	if c.PoolSandboxBytes <= 0 {
		c.PoolSandboxBytes = DefaultPoolSandboxBytes
	}
	if c.PoolPrestart == nil {
		c.PoolPrestart = []string{"python"}
	}
	if c.DefaultTemplate == "" {
		c.DefaultTemplate = DefaultTemplate
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Meter == nil {
		c.Meter = telemetry.Meter()
	}
	return c
}

// poolSize is the warm pool size of template (an id when Config.Catalog
// is set).
func (m *Manager) poolSize(template string) int {
	if n, ok := (*m.poolSizes.Load())[template]; ok {
		return max(n, 0)
	}
	if spec, ok := m.cfg.PoolSpecs[template]; ok {
		return max(spec.Size, 0)
	}
	if m.cfg.Catalog != nil {
		info, err := m.cfg.Catalog.TemplateInfo(context.Background(), template)
		if err != nil || !info.Public {
			return 0
		}
	}
	return max(m.cfg.PoolSize, 0)
}

// Catalog is what the manager asks about templates (Config.Catalog).
type Catalog interface {
	// ResolveTemplate finds what ref ("" the default template) means for
	// tenantID; not_found when nothing.
	ResolveTemplate(ctx context.Context, tenantID, ref string) (TemplateInfo, error)
	// TemplateInfo describes the template of id.
	TemplateInfo(ctx context.Context, id string) (TemplateInfo, error)
}

// TemplateInfo is what the manager knows of a template.
type TemplateInfo struct {
	ID, Name string
	// Languages run_code offers there; nil: all.
	Languages []string
	// Public: shared by every tenant (built-ins too); such templates get a
	// warm pool of PoolSize unless PoolSizes says otherwise.
	Public bool
}
