package contexts

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
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
	log      *slog.Logger
	inst     *instruments

	idLocks     keyed[Identity]
	tenantLocks keyed[string]

	mu       sync.Mutex
	byID     map[string]*entry   // active contexts by context id
	byIdent  map[Identity]*entry // the same, by identity
	creating map[string]bool     // context ids between Store.Create and ready
	pools    map[string]*pool    // by template
	tstats   map[string]*TemplateStats
	suspects map[string]bool // sandbox ids unknown at the previous sweep
	started  bool
	closed   bool
	stopCh   chan struct{} // closed by Close to stop the loops
	// unobserve unregisters the gauges Start registered (metrics.go).
	unobserve func()

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
}

// NewManager returns a Manager; call Start to reconcile and run the pool
// and cleanup loop. Without Start the manager still serves requests, with
// no warm pool and no background cleanup.
func NewManager(store Store, provider Provider, cfg Config) *Manager {
	cfg = cfg.withDefaults()
	return &Manager{
		store:    store,
		provider: provider,
		cfg:      cfg,
		log:      cfg.Logger,
		inst:     newInstruments(cfg.Meter),
		byID:     map[string]*entry{},
		byIdent:  map[Identity]*entry{},
		creating: map[string]bool{},
		pools:    map[string]*pool{},
		tstats:   map[string]*TemplateStats{},
		suspects: map[string]bool{},
		stopCh:   make(chan struct{}),
	}
}

var errClosed = fmt.Errorf("context manager is closed: %w", errdefs.ErrUnavailable)

func (m *Manager) now() time.Time { return m.cfg.Clock() }

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

func cloneRecord(r *Record) *Record {
	c := *r
	c.Metadata = maps.Clone(r.Metadata)
	if r.TerminatedAt != nil {
		t := *r.TerminatedAt
		c.TerminatedAt = &t
	}
	return &c
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
