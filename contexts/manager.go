package contexts

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// Manager runs execution contexts over a Store and a Provider. It keeps an
// in-memory cache of the active contexts it serves and their connected
// sandboxes; the store is the source of truth across processes, and a store
// failure is logged while the in-memory state carries on.
//
// Locking order: an identity lock (held across lookup, health check and
// creation, so one process creates at most one sandbox per identity), then a
// tenant lock (held across the limit check and Store.Create), then mu. A
// context's exec lock serializes Execute calls and is never held while
// taking an identity lock.
type Manager struct {
	store    Store
	provider Provider
	cfg      Config
	// shared: the provider is CapShared, so every node serves every
	// context and the cluster lease gates the work over all of them
	// (lease.go).
	shared bool
	log    *slog.Logger
	inst   *instruments

	idLocks     keyed[Identity]
	tenantLocks keyed[string]

	mu       sync.Mutex
	byID     map[string]*entry   // active contexts by context id
	byIdent  map[Identity]*entry // the same, by identity
	creating map[string]bool     // context ids between Store.Create and ready
	pools    map[poolKey]*pool   // by template and boot kernels
	// poolWaitMax, when set (tests), bounds a create's wait for a warm
	// sandbox being made instead of poolWaitBound.
	poolWaitMax time.Duration
	// poolSizes is Config.PoolSizes with public templates' names turned
	// into ids at Start (Config.Catalog).
	poolSizes atomic.Pointer[map[string]int]
	// tstats are the counters by tenant and template (query.go): one
	// small struct per pair this manager served since it started.
	tstats   map[statsKey]*TemplateStats
	suspects map[string]bool // sandbox ids unknown at the previous sweep
	// suspectsMark is creates' mark (inflight) at the previous sweep:
	// its suspects are strays once no create begun before it runs.
	suspectsMark uint64
	creates      inflight // sandbox creates under way (inflight.go)
	// sweepListed, when set (tests), runs in each sweep right after it
	// listed the owners, for a test of a create ending at that moment.
	sweepListed func()
	// lost holds, by identity, when a context ended because its sandbox
	// was lost, until the identity's next context takes it over
	// (entry.replacedLost) or the cleanup loop forgets it after a TTL.
	lost    map[Identity]time.Time
	started bool
	closed  bool
	stopCh  chan struct{} // closed by Close to stop the loops
	// makes is the warm pool's creations' context: Close lets a creation
	// under way finish (and destroys what it made) rather than killing
	// the runtime mid-create, and ends it (endMakes) only when its own
	// context ends first.
	makes    context.Context
	endMakes context.CancelFunc
	// discarding counts the background destroys under way (destroyLater),
	// writers the entries' tally writers running or due (tally.go); Close
	// waits for both. armed holds the entries whose writer waits for its
	// timer (tally.go): settle and Close start them.
	discarding, writers busy
	armed               map[*entry]struct{}
	tallyDelay          time.Duration // tally.go's tallyDelay; tests lengthen it
	providerBound       time.Duration // suspend.go's bound on a capture or checkpoint; tests shorten it
	// unobserve unregisters the gauges Start registered (metrics.go).
	unobserve func()

	// forks pins the fork templates forks are still starting from here
	// (forkdrop.go); the store marks which templates are forks'.
	forks forkPins

	// obsMu guards observers, told of every termination after
	// Config.OnTerminated (OnTerminated).
	obsMu     sync.Mutex
	observers []observer
	obsSeq    int

	// leaseMu guards leaseUntil: until when (monotonic) this node holds
	// the cluster lease. It may be taken under mu, never mu under it.
	leaseMu    sync.Mutex
	leaseUntil time.Time

	// watch are the Watchers told of every record written (watch.go).
	watch watchers

	wg sync.WaitGroup // background loops and pool workers
}

// entry is one active context served by this manager.
type entry struct {
	exec sem // serializes Execute

	// Guarded by Manager.mu.
	rec     *Record       // latest known copy
	sb      Sandbox       // nil until attached (after reconcile)
	ttl     time.Duration // extension applied on every use
	ended   bool          // terminated; callers holding it must start over
	users   int           // Use callbacks running; expiry waits for them
	unsaved bool          // Store.Create failed: the record lives only here
	alive   time.Time     // when sb last answered (wall clock, monotonic)
	secrets []string      // declared secret values the guard masks (mask)
	// replacedLost: this context replaced one whose sandbox was lost, and
	// no call has reported it yet (takeReplaced).
	replacedLost bool
	// woken: this context woke from suspension to disk and no call has
	// reported it yet (takeWoken).
	woken bool
	// restored: this context woke from suspension with its memory
	// (restore.go) and no call has reported it yet (takeRestored).
	restored bool
	// moving counts checkpoints under way (checkpointing.go): the agent
	// lets go of its channel for them, and a connection failing meanwhile
	// is no evidence of a loss.
	moving int
	// tally holds the executions answered and not yet in the store
	// (tally.go); useDue, a use of a fixed-expiry record kept in memory
	// for its call and not yet handed to the writer (writeUse).
	tally  tally
	useDue bool
}

// NewManager returns a Manager; call Start to reconcile and run the pool
// and cleanup loop. Without Start the manager still serves requests, with
// no warm pool and no background cleanup.
func NewManager(store Store, provider Provider, cfg Config) *Manager {
	cfg = cfg.withDefaults()
	if cfg.Guard != nil {
		cfg.Guard = taskGuard{g: cfg.Guard, task: TaskSandboxExecution}
	}
	makes, endMakes := context.WithCancel(context.Background())
	m := &Manager{
		store:    store,
		provider: provider,
		cfg:      cfg,
		shared:   provider != nil && provider.Capabilities().Has(CapShared),
		log:      cfg.Logger,
		inst:     newInstruments(cfg.Meter),
		byID:     map[string]*entry{},
		byIdent:  map[Identity]*entry{},
		creating: map[string]bool{},
		pools:    map[poolKey]*pool{},
		tstats:   map[statsKey]*TemplateStats{},
		suspects: map[string]bool{},
		lost:     map[Identity]time.Time{},
		stopCh:   make(chan struct{}),
		makes:    makes,
		endMakes: endMakes,
	}
	m.armed, m.tallyDelay, m.providerBound = map[*entry]struct{}{}, tallyDelay, providerBound
	sizes := maps.Clone(cfg.PoolSizes)
	m.poolSizes.Store(&sizes)
	return m
}

var errClosed = errdefs.Public(fmt.Errorf("context manager is closed: %w", errdefs.ErrUnavailable),
	"The server is shutting down; retry once it is back.")

func (m *Manager) now() time.Time { return m.cfg.Clock() }

// Now is the manager's clock (Config.Clock), for edges that judge a
// record's times as the manager does.
func (m *Manager) Now() time.Time { return m.now() }

// tctx scopes ctx to a tenant for the store (row-level security).
func tctx(ctx context.Context, tenantID string) context.Context {
	return tenant.WithID(ctx, tenantID)
}

// snapshot copies e's record. Precondition: mu not held.
func (m *Manager) snapshot(e *entry) *Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneRecord(e.rec)
}

func cloneRecord(r *Record) *Record { return r.Clone() }

// withEnv returns r, a record read from the store, with the create's
// environment of cur, the manager's copy, when the store returned none: a
// store without a secrets key keeps none at rest, so the manager's copy is
// what a wake in this process has (Record.Env). Precondition: mu held.
func withEnv(r, cur *Record) *Record {
	if r.Env == nil && cur != nil && cur.ID == r.ID {
		r.Env = cur.Env
	}
	return r
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// defaultTemplateID is the id of Config.DefaultTemplate (its name without
// a Catalog, or when the catalog does not know it yet).
func (m *Manager) defaultTemplateID(ctx context.Context) string {
	if m.cfg.Catalog != nil {
		if info, err := m.cfg.Catalog.ResolveTemplate(ctx, "", m.cfg.DefaultTemplate); err == nil {
			return info.ID
		}
	}
	return m.cfg.DefaultTemplate
}

// resolvePoolSizes turns the names of public templates among PoolSizes'
// keys into their ids (Config.Catalog); keys the catalog does not know
// stay as they are.
func (m *Manager) resolvePoolSizes(ctx context.Context) {
	if m.cfg.Catalog == nil || len(m.cfg.PoolSizes) == 0 {
		return
	}
	out := make(map[string]int, len(m.cfg.PoolSizes))
	for k, n := range m.cfg.PoolSizes {
		if info, err := m.cfg.Catalog.ResolveTemplate(ctx, "", k); err == nil {
			k = info.ID
		}
		out[k] = n
	}
	m.poolSizes.Store(&out)
}
