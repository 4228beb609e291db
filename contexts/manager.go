package contexts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/telemetry"
	"github.com/sandlot/sandlot/tenant"
)

// CreateOptions shape a context when GetOrCreate has to create it; they are
// ignored when the identity already has an active context.
type CreateOptions struct {
	Template string            // "" = Config.DefaultTemplate
	TTL      time.Duration     // 0 = Config.TTL
	Metadata map[string]string // stored on the record when created
	// Env is the sandbox environment. A context with Env is never served
	// from the warm pool (pooled sandboxes started without it).
	Env map[string]string
	// ID is the new context's id (a UUID); "" = a fresh one. The E2B
	// surface makes a sandbox's id its conversation's.
	ID string
	// ContextID, when set, confines the call to that context: it is never
	// created or replaced, and when the identity's live context is another
	// one or none (ended, expired, its sandbox lost) the call fails with
	// not_found. The E2B surface addresses sandboxes this way.
	ContextID string
	// MaxExecutions overrides Config.MaxExecutionsPerContext for this
	// context: 0 = the config's, negative = never rotate (E2B sandboxes,
	// whose lifecycle is timeout and kill). A nonzero value is kept on the
	// record (Metadata[MetaMaxExecutions]) so it survives a restart.
	MaxExecutions int64
	// Network asks for a network of the sandbox's own under this policy
	// (Spec.Network); nil: loopback only. A context with a network is
	// never served from the warm pool.
	Network *policy.Policy
}

// MetaMaxExecutions is the record metadata key that holds a context's own
// rotation limit (CreateOptions.MaxExecutions).
const MetaMaxExecutions = "sandlot.maxExecutions"

// templateNotFound is the error for a template the manager does not know:
// "template NAME not found", category not_found.
type templateNotFound string

func (e templateNotFound) Error() string { return "template " + string(e) + " not found" }
func (templateNotFound) Unwrap() error   { return errdefs.ErrNotFound }

// hasTemplate reports whether name is one of Config.Templates (by default
// DefaultTemplate and the keys of PoolSizes).
func (m *Manager) hasTemplate(name string) bool {
	if len(m.cfg.Templates) == 0 {
		_, pooled := m.cfg.PoolSizes[name]
		return name == m.cfg.DefaultTemplate || pooled
	}
	return slices.Contains(m.cfg.Templates, name)
}

// rotationDue reports whether rec has used up its executions and must rotate.
func (m *Manager) rotationDue(rec *Record) bool {
	max := m.maxExecutions(rec)
	return max > 0 && rec.ExecutionCount >= max
}

// maxExecutions is rec's rotation limit; <= 0 never rotates.
func (m *Manager) maxExecutions(rec *Record) int64 {
	if v, ok := rec.Metadata[MetaMaxExecutions]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n != 0 {
			return n
		}
	}
	return m.cfg.MaxExecutionsPerContext
}

// ExecuteRequest is one Execute call.
type ExecuteRequest struct {
	Language string        // python | javascript | typescript | bash | sh
	Code     string        // at most Config.MaxCodeBytes
	Timeout  time.Duration // 0 = Config.DefaultTimeout; MinTimeout..MaxTimeout, else invalid_argument
	Kernel   string        // named kernel (E2B code contexts); "" = default
	Env      map[string]string
	// ContextID, when set, runs only in that context (see
	// CreateOptions.ContextID): never in a fresh one.
	ContextID string
}

// ExecuteResult is a guarded run result and where it ran.
type ExecuteResult struct {
	agent.RunCodeResult // guarded
	ContextID           string
	SandboxID           string
	Identity            Identity
}

// Path event types.
const (
	PathBranched = "branched"
	PathEdited   = "edited"
	PathMerged   = "merged"
	PathDeleted  = "deleted"
	PathArchived = "archived"
)

// PathEvent reports a change to a conversation's paths.
//
// Which path an event is about: for merged, SourcePathID when set (the
// event may be posted on the target path and name the source), else the
// identity's path; for deleted and archived, the identity's path. branched
// and edited change nothing: a new branch gets its own fresh context
// lazily, inheriting nothing.
type PathEvent struct {
	Type         string // branched | edited | merged | deleted | archived
	SourcePathID string // for branched/merged when the event names the other path
	TargetPathID string
}

// TemplateStats are the counters of one template (or the totals).
type TemplateStats struct {
	Active              int64 `json:"active"`
	TotalCreated        int64 `json:"totalCreated"`
	TotalReused         int64 `json:"totalReused"`
	TotalCleaned        int64 `json:"totalCleaned"` // contexts this manager terminated and tore down, any reason
	HealthCheckFailures int64 `json:"healthCheckFailures"`
	PoolSize            int64 `json:"poolSize"` // warm sandboxes ready now
	PoolHits            int64 `json:"poolHits"`
	PoolMisses          int64 `json:"poolMisses"`
}

// Stats are the manager's counters: totals and per template.
type Stats struct {
	Active, TotalCreated, TotalReused, TotalCleaned, HealthCheckFailures int64
	PoolSize, PoolHits, PoolMisses                                       int64
	PerTemplate                                                          map[string]TemplateStats
}

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

// doner is a sandbox connection that reports its closing (*agent.Client).
type doner interface{ Done() <-chan struct{} }

// provedAlive reports whether sb answered within HealthCheckInterval and
// its connection is still open, which counts as a passed health check.
func (m *Manager) provedAlive(e *entry, sb Sandbox) bool {
	if m.cfg.HealthCheckInterval <= 0 {
		return false
	}
	d, ok := sb.(doner)
	if !ok {
		return false
	}
	select {
	case <-d.Done():
		return false
	default:
	}
	m.mu.Lock()
	at := e.alive
	m.mu.Unlock()
	return !at.IsZero() && time.Since(at) < m.cfg.HealthCheckInterval
}

// markAlive records that e's sandbox just answered.
func (m *Manager) markAlive(e *entry) {
	now := time.Now()
	m.mu.Lock()
	e.alive = now
	m.mu.Unlock()
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

// ts returns the counters of template. Precondition: mu held.
func (m *Manager) ts(template string) *TemplateStats {
	s := m.tstats[template]
	if s == nil {
		s = &TemplateStats{}
		m.tstats[template] = s
	}
	return s
}

func (m *Manager) count(template string, f func(*TemplateStats)) {
	m.mu.Lock()
	f(m.ts(template))
	m.mu.Unlock()
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

// GetOrCreate returns the active context of id, creating it lazily (from
// the warm pool when it can). A reused context is health-checked; if its
// sandbox is gone it is terminated (reason error) and replaced
// transparently. Every call extends expiresAt to now + TTL.
func (m *Manager) GetOrCreate(ctx context.Context, id Identity, opts CreateOptions) (*Record, error) {
	e, err := m.acquire(ctx, id, opts, 0)
	if err != nil {
		return nil, err
	}
	return m.snapshot(e), nil
}

// acquire returns the ready, health-checked and touched entry of id,
// inside a get_or_create span.
//
// recordWithin > 0 says the caller records the use itself (Execute:
// Store.RecordExecution sets lastUsedAt and expiresAt after the call) and
// that its call ends within recordWithin: a reused context whose expiresAt
// is further away than that is not touched first, saving one store write
// per call. Zero touches on reuse (GetOrCreate, Use).
func (m *Manager) acquire(ctx context.Context, id Identity, opts CreateOptions, recordWithin time.Duration) (*entry, error) {
	ctx, span := startSpan(ctx, spanGetOrCreate, id)
	e, err := m.acquireEntry(ctx, id, opts, recordWithin)
	m.sandboxAttr(span, e)
	endSpan(span, err)
	return e, err
}

func (m *Manager) acquireEntry(ctx context.Context, id Identity, opts CreateOptions, recordWithin time.Duration) (*entry, error) {
	id, err := normalize(id)
	if err != nil {
		return nil, err
	}
	if m.isClosed() {
		return nil, errClosed
	}
	unlock, err := m.idLocks.lock(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("wait for context of %s: %w", id.ConversationID, err)
	}
	defer unlock()
	var lastErr error
	for range 4 {
		m.mu.Lock()
		e := m.byIdent[id]
		m.mu.Unlock()
		if e == nil {
			if e, err = m.load(ctx, id); err != nil {
				return nil, err
			}
		}
		if e != nil && opts.ContextID != "" && m.snapshot(e).ID != opts.ContextID {
			e = nil // the identity moved on to another context
		}
		if e != nil {
			if m.revive(ctx, e, recordWithin) {
				m.mu.Lock()
				template := e.rec.Template
				m.ts(template).TotalReused++
				m.mu.Unlock()
				m.cfg.Metrics.ContextReused(template)
				return e, nil
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if opts.ContextID != "" {
			return nil, fmt.Errorf("context %s is not active: %w", opts.ContextID, errdefs.ErrNotFound)
		}
		e, err = m.create(ctx, id, opts)
		if errors.Is(err, errLostRace) {
			lastErr = err
			continue // another process created it: load and attach on the next turn
		}
		return e, err
	}
	return nil, fmt.Errorf("context of %s/%s: %w", id.ConversationID, id.PathID, lastErr)
}

var errLostRace = fmt.Errorf("another manager created this context concurrently: %w", errdefs.ErrUnavailable)

// load builds an entry from the store's active record of id (created by
// another process, or before a restart); its sandbox is attached by revive.
// Nil when there is none or the store fails; an error when another live
// node owns it (see own).
func (m *Manager) load(ctx context.Context, id Identity) (*entry, error) {
	rec, err := m.store.GetActive(tctx(ctx, id.TenantID), id)
	if err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) {
			m.log.Warn("store: load active context", logTenant, id.TenantID, logErr, err)
		}
		return nil, nil
	}
	if rec, err = m.own(ctx, rec); rec == nil {
		return nil, err
	}
	return m.adopt(rec), nil
}

// adopt registers rec as an entry without a connected sandbox, or returns
// the entry already registered for it.
func (m *Manager) adopt(rec *Record) *entry {
	m.mu.Lock()
	if e := m.byID[rec.ID]; e != nil {
		m.mu.Unlock()
		return e
	}
	ttl := rec.ExpiresAt.Sub(rec.LastUsedAt)
	if ttl <= 0 {
		ttl = m.cfg.TTL
	}
	e := &entry{exec: make(sem, 1), rec: rec, ttl: ttl}
	var stale Sandbox
	if old := m.byIdent[rec.Identity]; old != nil {
		stale = m.unlink(old) // ended elsewhere: the store moved on
	}
	m.byID[rec.ID] = e
	m.byIdent[rec.Identity] = e
	m.mu.Unlock()
	if stale != nil {
		stale.Close()
	}
	return e
}

// revive makes e usable: it waits for a record another process is
// creating, rotates or expires it when due, attaches and pings its sandbox
// and touches it (see acquire for recordWithin). It reports false when e
// was ended instead (the caller creates a new context). Precondition: the
// identity lock is held.
func (m *Manager) revive(ctx context.Context, e *entry, recordWithin time.Duration) bool {
	m.mu.Lock()
	rec := cloneRecord(e.rec)
	sb, ttl, ended := e.sb, e.ttl, e.ended
	m.mu.Unlock()
	if ended {
		return false
	}
	if rec.State == StateCreating && sb == nil {
		r, ok := m.waitReady(ctx, rec)
		if !ok {
			m.drop(e)
			return false
		}
		m.mu.Lock()
		e.rec, rec = r, cloneRecord(r)
		m.mu.Unlock()
	}
	now := m.now()
	switch {
	case !rec.ExpiresAt.After(now):
		m.end(ctx, e, ReasonExpired, "")
		return false
	case m.rotationDue(rec):
		m.end(ctx, e, ReasonRotated, "")
		return false
	}
	if sb == nil {
		var err error
		sb, err = m.provider.Attach(ctx, rec.SandboxID)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			m.healthFailed(ctx, e, "sandbox lost: attach: "+err.Error())
			return false
		}
		m.mu.Lock()
		if e.ended {
			m.mu.Unlock()
			sb.Close()
			return false
		}
		e.sb = sb
		m.mu.Unlock()
	}
	if !m.provedAlive(e, sb) {
		pctx, cancel := context.WithTimeout(ctx, m.cfg.HealthCheckTimeout)
		err := sb.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			m.healthFailed(ctx, e, "health check failed: "+err.Error())
			return false
		}
		m.markAlive(e)
	}
	if recordWithin > 0 && rec.ExpiresAt.After(now.Add(recordWithin)) {
		// The record stays unexpired for the whole call, for every process
		// (cleanup here skips an executing context anyway), and the call's
		// Store.RecordExecution extends it and reports a record another
		// process ended (recordExecution drops the entry then). A sandbox
		// that process tore down is caught before the call by the health
		// check (its connection is closed).
		return true
	}
	return m.touch(ctx, e, now, ttl)
}

// touch extends e's expiry and reports false when the store says another
// process ended it (e is dropped).
func (m *Manager) touch(ctx context.Context, e *entry, now time.Time, ttl time.Duration) bool {
	exp := now.Add(ttl)
	m.mu.Lock()
	e.rec.LastUsedAt, e.rec.ExpiresAt = now, exp
	id, tid, unsaved := e.rec.ID, e.rec.TenantID, e.unsaved
	m.mu.Unlock()
	if unsaved {
		return true
	}
	if err := m.store.Touch(tctx(ctx, tid), id, now, exp); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrFailedPrecondition) {
			m.log.Info("context ended elsewhere; dropping it", logContext, id, logErr, err)
			m.drop(e)
			return false
		}
		m.log.Warn("store: touch context", logContext, id, logErr, err)
	}
	return true
}

// waitReady polls a record another process is creating until it is ready.
// A record stuck in creating past CreatingTimeout is ended as an orphan.
func (m *Manager) waitReady(ctx context.Context, rec *Record) (*Record, bool) {
	deadline := rec.CreatedAt.Add(m.cfg.CreatingTimeout)
	sctx := tctx(ctx, rec.TenantID)
	for {
		r, err := m.store.Get(sctx, rec.ID)
		if err != nil {
			return nil, false
		}
		switch {
		case r.State == StateReady:
			return r, true
		case !r.State.Active():
			return nil, false
		case !m.now().Before(deadline):
			m.terminateRecord(ctx, r, ReasonError, "stuck in creating")
			return nil, false
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (m *Manager) healthFailed(ctx context.Context, e *entry, msg string) {
	if m.isClosed() {
		// Close detached the sandbox under this call: that is no evidence
		// against it, and it must stay running for the next Start.
		return
	}
	m.mu.Lock()
	template, id, tid := e.rec.Template, e.rec.ID, e.rec.TenantID
	m.ts(template).HealthCheckFailures++
	m.mu.Unlock()
	m.cfg.Metrics.HealthCheckFailed()
	m.log.Warn("context sandbox unhealthy; recreating", logContext, id, logErr, m.sanitize(ctx, tid, msg))
	m.end(ctx, e, ReasonError, msg)
}

// limitErr checks the tenant and conversation limits for a new context of
// id. Precondition: the tenant lock is held.
func (m *Manager) limitErr(ctx context.Context, id Identity) error {
	count := func(conv string) int {
		n, err := m.store.CountActive(tctx(ctx, id.TenantID), id.TenantID, conv)
		if err != nil {
			m.log.Warn("store: count active contexts; using the in-memory count", logTenant, id.TenantID, logErr, err)
			n = 0
			m.mu.Lock()
			for k := range m.byIdent {
				if k.TenantID == id.TenantID && (conv == "" || k.ConversationID == conv) {
					n++
				}
			}
			m.mu.Unlock()
		}
		return n
	}
	if lim := m.cfg.MaxPerTenant; lim > 0 {
		if n := count(""); n >= lim {
			return fmt.Errorf("tenant %s has %d active contexts (limit %d); terminate one or wait for expiry: %w",
				id.TenantID, n, lim, errdefs.ErrResourceExhausted)
		}
	}
	if lim := m.cfg.MaxPerConversation; lim > 0 {
		if n := count(id.ConversationID); n >= lim {
			return fmt.Errorf("conversation %s of tenant %s has %d active contexts (limit %d); terminate one or wait for expiry: %w",
				id.ConversationID, id.TenantID, n, lim, errdefs.ErrResourceExhausted)
		}
	}
	return nil
}

// create makes a new context for id: the record first (the store's
// uniqueness is the cross-process guard), then the sandbox. It returns
// errLostRace when another process holds the identity. Precondition: the
// identity lock is held.
func (m *Manager) create(ctx context.Context, id Identity, opts CreateOptions) (*entry, error) {
	template := opts.Template
	if template == "" {
		template = m.cfg.DefaultTemplate
	}
	if !m.hasTemplate(template) {
		return nil, templateNotFound(template)
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = m.cfg.TTL
	}
	now := m.now()
	recID := opts.ID
	if recID == "" {
		recID = uuid.NewString()
	} else if _, err := uuid.Parse(recID); err != nil {
		return nil, fmt.Errorf("context id %q is not a UUID: %w", recID, errdefs.ErrInvalidArgument)
	}
	rec := &Record{
		ID:         recID,
		Identity:   id,
		State:      StateCreating,
		Provider:   m.provider.Name(),
		Template:   template,
		CreatedAt:  now,
		LastUsedAt: now,
		ExpiresAt:  now.Add(ttl),
		Metadata:   maps.Clone(opts.Metadata),
		Node:       m.cfg.Node,
	}
	if opts.MaxExecutions != 0 {
		if rec.Metadata == nil {
			rec.Metadata = map[string]string{}
		}
		rec.Metadata[MetaMaxExecutions] = strconv.FormatInt(opts.MaxExecutions, 10)
	}
	if err := m.checkNetwork(id.TenantID, opts.Network); err != nil {
		return nil, err
	}
	if err := setNetworkMeta(rec, opts.Network); err != nil {
		return nil, err
	}
	sctx := tctx(ctx, id.TenantID)

	unlockTenant, err := m.tenantLocks.lock(ctx, id.TenantID)
	if err != nil {
		return nil, err
	}
	if err := m.limitErr(ctx, id); err != nil {
		unlockTenant()
		return nil, err
	}
	unsaved := false
	if err := m.store.Create(sctx, rec); err != nil {
		switch {
		case errors.Is(err, errdefs.ErrAlreadyExists):
			unlockTenant()
			return nil, errLostRace
		case errors.Is(err, errdefs.ErrInvalidArgument), errors.Is(err, errdefs.ErrPermissionDenied):
			unlockTenant()
			return nil, err
		}
		m.log.Warn("store: create context; carrying on in memory", logContext, rec.ID, logErr, err)
		unsaved = true
	}
	e := &entry{exec: make(sem, 1), rec: rec, ttl: ttl, unsaved: unsaved}
	m.mu.Lock()
	m.creating[rec.ID] = true
	m.byID[rec.ID] = e
	m.byIdent[id] = e
	m.mu.Unlock()
	unlockTenant()

	sb, err := m.sandbox(ctx, rec, opts)
	m.mu.Lock()
	delete(m.creating, rec.ID)
	m.mu.Unlock()
	if err != nil {
		m.end(context.WithoutCancel(ctx), e, ReasonError, "create sandbox: "+err.Error())
		if !errdefs.IsClientFault(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("create sandbox for context %s: %w", rec.ID, guardError(ctx, m.cfg.Guard, id.TenantID, err))
	}

	m.mu.Lock()
	e.sb = sb
	e.rec.State = StateReady
	e.rec.SandboxID = sb.ID()
	saved := cloneRecord(e.rec)
	ended := e.ended
	m.ts(template).TotalCreated++
	m.mu.Unlock()
	if ended { // terminated while creating (Close, Terminate)
		m.destroy(context.WithoutCancel(ctx), sb, sb.ID())
		return nil, fmt.Errorf("context %s was terminated while being created: %w", rec.ID, errdefs.ErrUnavailable)
	}
	if !unsaved {
		if err := m.store.Update(sctx, saved); err != nil {
			if errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) {
				m.drop(e)
				m.destroy(context.WithoutCancel(ctx), sb, sb.ID())
				return nil, fmt.Errorf("context %s was ended while being created: %w", rec.ID, errdefs.ErrUnavailable)
			}
			m.log.Warn("store: mark context ready", logContext, rec.ID, logErr, err)
		}
	}
	m.cfg.Metrics.ContextCreated(template, rec.Provider)
	m.log.Debug("context created", logContext, rec.ID, logTenant, id.TenantID, logSandbox, sb.ID(), logTemplate, template)
	return e, nil
}

// sandbox returns a sandbox for rec: a warm one from the pool when it can,
// else a new one.
func (m *Manager) sandbox(ctx context.Context, rec *Record, opts CreateOptions) (Sandbox, error) {
	if len(opts.Env) == 0 && opts.Network == nil {
		if sb := m.poolTake(ctx, rec.Template); sb != nil {
			return sb, nil
		}
	}
	spec := Spec{
		Template: rec.Template,
		Limits:   m.cfg.Limits,
		Env:      maps.Clone(opts.Env),
		Labels:   map[string]string{LabelTenant: rec.TenantID, LabelContext: rec.ID},
		TTL:      rec.ExpiresAt.Sub(rec.CreatedAt),
		Network:  opts.Network,
	}
	sb, err := m.provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	m.poolEnsure(rec.Template)
	return sb, nil
}

// drop forgets e without touching its sandbox beyond closing the
// connection (another process owns its teardown).
func (m *Manager) drop(e *entry) {
	m.mu.Lock()
	sb := m.unlink(e)
	m.mu.Unlock()
	if sb != nil {
		sb.Close()
	}
}

// unlink removes e from the maps, marks it ended and returns its sandbox.
// Precondition: mu held.
func (m *Manager) unlink(e *entry) Sandbox {
	e.ended = true
	if m.byID[e.rec.ID] == e {
		delete(m.byID, e.rec.ID)
	}
	if m.byIdent[e.rec.Identity] == e {
		delete(m.byIdent, e.rec.Identity)
	}
	sb := e.sb
	e.sb = nil
	return sb
}

// end terminates e with reason and tears its sandbox down when this
// manager wins Store.Terminate (two managers never both destroy). A store
// failure is logged and the teardown goes ahead.
func (m *Manager) end(ctx context.Context, e *entry, reason Reason, lastErr string) bool {
	m.mu.Lock()
	rec := cloneRecord(e.rec)
	unsaved := e.unsaved
	m.mu.Unlock()
	lastErr = m.sanitize(ctx, rec.TenantID, lastErr)
	at := m.now()
	won := true
	if !unsaved {
		ok, err := m.store.Terminate(tctx(context.WithoutCancel(ctx), rec.TenantID), rec.ID, reason, at, lastErr)
		switch {
		case err == nil:
			won = ok
		case errors.Is(err, errdefs.ErrNotFound):
			won = false
		default:
			m.log.Warn("store: terminate context; tearing down anyway", logContext, rec.ID, logErr, err)
		}
	}
	m.mu.Lock()
	sb := m.unlink(e)
	if won {
		e.rec.State = finalState(reason)
		e.rec.Reason = reason
		e.rec.TerminatedAt = &at
		if lastErr != "" {
			e.rec.LastError = lastErr
		}
		m.ts(rec.Template).TotalCleaned++
	}
	m.mu.Unlock()
	if !won {
		if sb != nil {
			sb.Close()
		}
		return false
	}
	sid := rec.SandboxID
	if sb != nil {
		sid = sb.ID()
	}
	m.destroy(context.WithoutCancel(ctx), sb, sid)
	m.cfg.Metrics.ContextTerminated(string(reason))
	m.log.Info("context terminated", logContext, rec.ID, logTenant, rec.TenantID, logReason, string(reason))
	return true
}

// terminateRecord ends a record this manager does not serve (cleanup,
// reconcile) and destroys its sandbox when it wins.
func (m *Manager) terminateRecord(ctx context.Context, rec *Record, reason Reason, lastErr string) bool {
	m.mu.Lock()
	e := m.byID[rec.ID]
	m.mu.Unlock()
	if e != nil {
		return m.end(ctx, e, reason, lastErr)
	}
	ok, err := m.store.Terminate(tctx(context.WithoutCancel(ctx), rec.TenantID), rec.ID, reason, m.now(), m.sanitize(ctx, rec.TenantID, lastErr))
	if err != nil {
		m.log.Warn("store: terminate context", logContext, rec.ID, logErr, err)
		return false
	}
	if !ok {
		return false
	}
	m.count(rec.Template, func(s *TemplateStats) { s.TotalCleaned++ })
	m.destroy(context.WithoutCancel(ctx), nil, rec.SandboxID)
	m.cfg.Metrics.ContextTerminated(string(reason))
	m.log.Info("context terminated", logContext, rec.ID, logTenant, rec.TenantID, logReason, string(reason))
	return true
}

func finalState(r Reason) State {
	if r == ReasonError {
		return StateError
	}
	return StateTerminated
}

// destroy closes sb (when connected) and destroys sandbox id.
func (m *Manager) destroy(ctx context.Context, sb Sandbox, id string) {
	if sb != nil {
		sb.Close()
	}
	if id == "" {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := m.provider.Destroy(dctx, id); err != nil {
		m.log.Warn("destroy sandbox", logSandbox, id, logErr, err)
	}
}

// sanitize shapes an error message for Record.LastError: one line, at
// most 512 bytes, guarded.
func (m *Manager) sanitize(ctx context.Context, tenantID, s string) string {
	if s == "" {
		return s
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 512 {
		s = s[:512]
		for len(s) > 0 && !validEnd(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	if m.cfg.Guard != nil {
		s = m.cfg.Guard.Text(ctx, tenantID, s)
	}
	return s
}

func validEnd(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Languages accepted by Execute.
var languages = map[string]bool{
	agent.Python: true, agent.JavaScript: true, agent.TypeScript: true, agent.Bash: true, agent.Sh: true,
}

// validate checks req and returns its effective timeout.
func (m *Manager) validate(req ExecuteRequest) (time.Duration, error) {
	if !languages[req.Language] {
		return 0, fmt.Errorf("language %q is not supported (use python, javascript, typescript, bash or sh): %w",
			req.Language, errdefs.ErrInvalidArgument)
	}
	if len(req.Code) > m.cfg.MaxCodeBytes {
		return 0, fmt.Errorf("code is %d bytes (limit %d): %w", len(req.Code), m.cfg.MaxCodeBytes, errdefs.ErrInvalidArgument)
	}
	t := req.Timeout
	if t == 0 {
		t = m.cfg.DefaultTimeout
	}
	if t < m.cfg.MinTimeout || t > m.cfg.MaxTimeout {
		return 0, fmt.Errorf("timeout %s is outside %s..%s: %w", t, m.cfg.MinTimeout, m.cfg.MaxTimeout, errdefs.ErrInvalidArgument)
	}
	return t, nil
}

// timeoutGrace is how long past the run's own timeout the manager waits
// for the agent to answer before it reports a timeout itself.
const timeoutGrace = 15 * time.Second

// Execute runs code in the context's persistent kernel. Calls on one
// context are serialized; different contexts run in parallel. out receives
// guarded streamed output (may be nil). A timeout is a result (TimedOut),
// not an error, and the context stays ready.
//
// Rotation: the call that brings a context's execution count to
// MaxExecutionsPerContext is answered normally, then the context is
// terminated with reason rotated; the next call gets a fresh sandbox.
func (m *Manager) Execute(ctx context.Context, id Identity, req ExecuteRequest, out OutputFunc) (*ExecuteResult, error) {
	ctx, span := startSpan(ctx, spanExecute, id, telemetry.AttrLanguage.String(req.Language))
	res, err := m.execute(ctx, id, req, out)
	if res != nil && span.IsRecording() {
		span.SetAttributes(telemetry.AttrSandbox.String(res.SandboxID))
		if res.TimedOut {
			span.SetAttributes(attrTimedOut)
		}
	}
	endSpan(span, err)
	return res, err
}

func (m *Manager) execute(ctx context.Context, id Identity, req ExecuteRequest, out OutputFunc) (*ExecuteResult, error) {
	timeout, err := m.validate(req)
	if err != nil {
		return nil, err
	}
	resent := false
	for range 4 {
		e, err := m.acquire(ctx, id, CreateOptions{ContextID: req.ContextID}, timeout+timeoutGrace)
		if err != nil {
			if errors.Is(err, errdefs.ErrUnavailable) && !errors.As(err, new(ownedError)) {
				m.cfg.Metrics.Execution(req.Language, OutcomeFault, 0) // a call for another node's context is no fault
			}
			return nil, err
		}
		if err := e.exec.lock(ctx); err != nil {
			return nil, err
		}
		m.mu.Lock()
		ended, sb := e.ended, e.sb
		m.mu.Unlock()
		if ended || sb == nil { // rotated or ended while we waited
			e.exec.unlock()
			continue
		}
		res, err := m.run(ctx, e, sb, req, timeout, out, !resent)
		e.exec.unlock()
		if errors.Is(err, errResend) {
			resent = true
			continue // the sandbox died before the request left: run it in a fresh one
		}
		return res, err
	}
	return nil, fmt.Errorf("context of %s/%s kept ending under this call: %w", id.ConversationID, id.PathID, errdefs.ErrUnavailable)
}

// errResend is run's answer when the call never reached a sandbox that
// turned out dead (agent.ErrNotSent, then a failed ping): the context is
// ended and the call may go to a fresh one, as if the health check before
// it had failed.
var errResend = errors.New("request not sent to a dead sandbox")

// run executes one call on e. Precondition: e's exec lock is held.
// mayResend allows errResend.
func (m *Manager) run(ctx context.Context, e *entry, sb Sandbox, req ExecuteRequest, timeout time.Duration, out OutputFunc, mayResend bool) (*ExecuteResult, error) {
	rec := m.snapshot(e)
	g := m.cfg.Guard
	sg := newStreamGuard(ctx, g, rec.TenantID, out)
	p := agent.RunCodeParams{
		Language:  req.Language,
		Code:      req.Code,
		Kernel:    req.Kernel,
		Env:       req.Env,
		TimeoutMs: timeout.Milliseconds(),
		Stream:    out != nil,
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+timeoutGrace)
	start := time.Now()
	res, err := sb.RunCode(cctx, p, sg.fn())
	cancel()
	sg.flush()
	wall := time.Since(start)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("execute in context %s: %w", rec.ID, ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			// The agent did not answer within the timeout and its grace:
			// report a timeout; the next call's health check decides
			// whether the sandbox survives.
			res = &agent.RunCodeResult{
				TimedOut:   true,
				Error:      &agent.ExecError{Name: "TimeoutError", Value: fmt.Sprintf("execution exceeded %s", timeout)},
				DurationMs: wall.Milliseconds(),
			}
		case errdefs.IsClientFault(err) && !errors.Is(err, errdefs.ErrUnavailable):
			// The request was refused (bad kernel name, ...): the sandbox is fine.
			m.markAlive(e)
			m.cfg.Metrics.Execution(req.Language, OutcomeError, wall)
			return nil, guardError(ctx, g, rec.TenantID, err)
		default:
			// A transport failure (the agent client reports them as
			// unavailable): the sandbox may be gone.
			pctx, pcancel := context.WithTimeout(ctx, m.cfg.HealthCheckTimeout)
			perr := sb.Ping(pctx)
			pcancel()
			if perr != nil {
				if mayResend && errors.Is(err, agent.ErrNotSent) && !m.isClosed() {
					// Provably never reached the agent: nothing ran, so
					// this is the failed health check of a reuse.
					m.healthFailed(ctx, e, "health check failed: "+err.Error())
					return nil, errResend
				}
				m.healthFailed(ctx, e, "sandbox lost during execution: "+err.Error())
			}
			m.cfg.Metrics.Execution(req.Language, OutcomeFault, wall)
			err = guardError(ctx, g, rec.TenantID, err)
			if !errors.Is(err, errdefs.ErrUnavailable) {
				err = fmt.Errorf("%w: %w", err, errdefs.ErrUnavailable)
			}
			return nil, fmt.Errorf("execute in context %s: the sandbox failed, the next call gets a fresh one: %w", rec.ID, err)
		}
	}
	if err == nil {
		m.markAlive(e) // the agent answered
	}
	dur := wall
	if res.DurationMs > 0 {
		dur = time.Duration(res.DurationMs) * time.Millisecond
	}
	m.recordExecution(ctx, e, dur)
	m.cfg.Metrics.Execution(req.Language, outcome(res), dur)

	m.mu.Lock()
	after, ended := cloneRecord(e.rec), e.ended
	m.mu.Unlock()
	if !ended && m.rotationDue(after) {
		m.end(ctx, e, ReasonRotated, "")
	}
	return &ExecuteResult{
		RunCodeResult: *guardRunResult(ctx, g, rec.TenantID, res),
		ContextID:     rec.ID,
		SandboxID:     sb.ID(),
		Identity:      rec.Identity,
	}, nil
}

func outcome(r *agent.RunCodeResult) string {
	switch {
	case r.TimedOut:
		return OutcomeTimeout
	case !r.Success || r.Error != nil:
		return OutcomeError
	}
	return OutcomeOK
}

// recordExecution counts one execution of dur on e and extends its
// expiry, atomically in the store; a store failure is logged and the
// in-memory copy is updated instead. A record the store reports ended (by
// another process) drops e, as touch does: the next call starts over.
func (m *Manager) recordExecution(ctx context.Context, e *entry, dur time.Duration) {
	now := m.now()
	m.mu.Lock()
	exp := now.Add(e.ttl)
	id, tid, unsaved := e.rec.ID, e.rec.TenantID, e.unsaved
	m.mu.Unlock()
	if !unsaved {
		r, err := m.store.RecordExecution(tctx(context.WithoutCancel(ctx), tid), id, dur, now, exp)
		if err == nil && r.Node != m.cfg.Node {
			// Another node took it over while this one's lease had lapsed.
			m.log.Warn("context taken over by another node; dropping it", logContext, id, logNode, r.Node)
			m.drop(e)
			return
		}
		if err == nil {
			m.mu.Lock()
			if !e.ended {
				e.rec = r
			}
			m.mu.Unlock()
			return
		}
		if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrFailedPrecondition) {
			m.log.Info("context ended elsewhere; dropping it", logContext, id, logErr, err)
			m.drop(e)
			return
		}
		m.log.Warn("store: record execution", logContext, id, logErr, err)
	}
	m.mu.Lock()
	e.rec.ExecutionCount++
	e.rec.TotalExecutionTimeMs += dur.Milliseconds()
	e.rec.LastUsedAt, e.rec.ExpiresAt = now, exp
	m.mu.Unlock()
}

// Use runs fn with the context's sandbox (GetOrCreate + health check + TTL
// touch). The sandbox passed to fn is guarded: everything it returns has
// passed the egress guard. Use does not serialize with Execute; the agent
// handles concurrent calls. fn must not keep sb after it returns, and
// sb.Close is a no-op.
func (m *Manager) Use(ctx context.Context, id Identity, opts CreateOptions, fn func(ctx context.Context, rec *Record, sb Sandbox) error) error {
	e, err := m.acquire(ctx, id, opts, 0)
	if err != nil {
		return err
	}
	m.mu.Lock()
	rec, sb := cloneRecord(e.rec), e.sb
	e.users++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		e.users--
		m.mu.Unlock()
	}()
	if sb == nil {
		return fmt.Errorf("context %s ended while starting: %w", rec.ID, errdefs.ErrUnavailable)
	}
	return fn(ctx, rec, GuardSandbox(sb, m.cfg.Guard, rec.TenantID))
}

// Get returns a context of tenantID by id (any state). A record of another
// tenant is ErrNotFound.
func (m *Manager) Get(ctx context.Context, tenantID, contextID string) (*Record, error) {
	rec, err := m.store.Get(tctx(ctx, tenantID), contextID)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("store: get context; using the in-memory copy", logContext, contextID, logErr, err)
	}
	if err != nil {
		m.mu.Lock()
		e := m.byID[contextID]
		if e != nil {
			rec = cloneRecord(e.rec)
		}
		m.mu.Unlock()
		if rec == nil {
			return nil, fmt.Errorf("context %s: %w", contextID, errdefs.ErrNotFound)
		}
	}
	if rec.TenantID != tenantID {
		return nil, fmt.Errorf("context %s: %w", contextID, errdefs.ErrNotFound)
	}
	return rec, nil
}

// Lookup returns the active record of id without creating one.
func (m *Manager) Lookup(ctx context.Context, id Identity) (*Record, error) {
	id, err := normalize(id)
	if err != nil {
		return nil, err
	}
	rec, err := m.store.GetActive(tctx(ctx, id.TenantID), id)
	if err == nil {
		return rec, nil
	}
	if !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("store: look up context; using the in-memory copy", logTenant, id.TenantID, logErr, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.byIdent[id]; e != nil && (e.unsaved || !errors.Is(err, errdefs.ErrNotFound)) {
		return cloneRecord(e.rec), nil
	}
	return nil, fmt.Errorf("active context of %s/%s/%s: %w", id.TenantID, id.ConversationID, id.PathID, errdefs.ErrNotFound)
}

// List returns records matching f. With f.TenantID set the store call is
// scoped to that tenant; an empty TenantID lists every tenant (admin).
func (m *Manager) List(ctx context.Context, f Filter) ([]*Record, error) {
	sctx := ctx
	if f.TenantID != "" {
		sctx = tctx(ctx, f.TenantID)
	}
	recs, err := m.store.List(sctx, f)
	if err != nil {
		return nil, fmt.Errorf("list contexts: %w", err)
	}
	return recs, nil
}

// Terminate ends a context of tenantID with reason (empty: manual) and
// destroys its sandbox. Terminating an ended context is a no-op; a context
// of another tenant is ErrNotFound.
func (m *Manager) Terminate(ctx context.Context, tenantID, contextID string, reason Reason) (err error) {
	ctx, span := startSpan(ctx, spanTerminate, Identity{TenantID: tenantID}, attrContext.String(contextID), attrReason.String(string(reason)))
	defer func() { endSpan(span, err) }()
	if reason == "" {
		reason = ReasonManual
	}
	if err := checkReason(reason); err != nil {
		return err
	}
	rec, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return err
	}
	if !rec.State.Active() {
		return nil
	}
	m.terminateRecord(ctx, rec, reason, "")
	return nil
}

func checkReason(r Reason) error {
	switch r {
	case ReasonExpired, ReasonError, ReasonManual, ReasonMerged, ReasonDeleted, ReasonArchived, ReasonRotated:
		return nil
	}
	return fmt.Errorf("termination reason %q: %w", r, errdefs.ErrInvalidArgument)
}

// SetTTL changes an active context's TTL and sets expiresAt to now + ttl.
// Later uses extend by the new TTL. A context another live node serves is
// refused like a call (unavailable, naming the node).
func (m *Manager) SetTTL(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*Record, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("ttl %s must be positive: %w", ttl, errdefs.ErrInvalidArgument)
	}
	rec, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	if !rec.State.Active() {
		return nil, fmt.Errorf("context %s is %s: %w", contextID, rec.State, errdefs.ErrFailedPrecondition)
	}
	if err := m.servedElsewhere(ctx, rec); err != nil {
		return nil, err // its node keeps the TTL in memory and would not see the change
	}
	now := m.now()
	exp := now.Add(ttl)
	m.mu.Lock()
	e := m.byID[contextID]
	unsaved := false
	if e != nil {
		e.ttl = ttl
		e.rec.LastUsedAt, e.rec.ExpiresAt = now, exp
		unsaved = e.unsaved
	}
	m.mu.Unlock()
	if !unsaved {
		if err := m.store.Touch(tctx(ctx, tenantID), contextID, now, exp); err != nil {
			if errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) {
				return nil, err
			}
			m.log.Warn("store: set ttl", logContext, contextID, logErr, err)
		}
	}
	rec.LastUsedAt, rec.ExpiresAt = now, exp
	return rec, nil
}

// PathEvent applies a conversation path event (see PathEvent for which
// path each type affects). Ending a path with no active context is a no-op.
func (m *Manager) PathEvent(ctx context.Context, id Identity, ev PathEvent) error {
	id, err := normalize(id)
	if err != nil {
		return err
	}
	var reason Reason
	switch ev.Type {
	case PathBranched, PathEdited:
		return nil
	case PathMerged:
		reason = ReasonMerged
		if ev.SourcePathID != "" {
			id.PathID = ev.SourcePathID
		}
	case PathDeleted:
		reason = ReasonDeleted
	case PathArchived:
		reason = ReasonArchived
	default:
		return fmt.Errorf("path event type %q (use branched, edited, merged, deleted or archived): %w",
			ev.Type, errdefs.ErrInvalidArgument)
	}
	unlock, err := m.idLocks.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	m.mu.Lock()
	e := m.byIdent[id]
	m.mu.Unlock()
	ctx, span := startSpan(ctx, spanTerminate, id, attrReason.String(string(reason)))
	defer span.End()
	if e != nil {
		m.end(ctx, e, reason, "")
	}
	// The store may know an active context this manager does not serve.
	rec, err := m.store.GetActive(tctx(ctx, id.TenantID), id)
	switch {
	case err == nil:
		m.terminateRecord(ctx, rec, reason, "")
	case !errors.Is(err, errdefs.ErrNotFound):
		m.log.Warn("store: path event lookup", logTenant, id.TenantID, logErr, err)
	}
	return nil
}

// Stats returns the manager's counters. Active counts the contexts this
// manager serves (including reconciled ones not yet attached).
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	per := map[string]TemplateStats{}
	for k, v := range m.tstats {
		s := *v
		s.Active = 0
		s.PoolSize = 0
		per[k] = s
	}
	for _, e := range m.byID {
		s := per[e.rec.Template]
		s.Active++
		per[e.rec.Template] = s
	}
	for k, p := range m.pools {
		s := per[k]
		s.PoolSize = int64(len(p.ready))
		per[k] = s
	}
	var st Stats
	for _, s := range per {
		st.Active += s.Active
		st.TotalCreated += s.TotalCreated
		st.TotalReused += s.TotalReused
		st.TotalCleaned += s.TotalCleaned
		st.HealthCheckFailures += s.HealthCheckFailures
		st.PoolSize += s.PoolSize
		st.PoolHits += s.PoolHits
		st.PoolMisses += s.PoolMisses
	}
	st.PerTemplate = per
	return st
}
