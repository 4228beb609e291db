package contexts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Start renews this node's lease, reconciles the store with the provider,
// warms the pools and starts the cleanup and heartbeat loops.
//
// Reconciliation after a crash or restart, over this node's records only
// (another node's sandboxes are out of this provider's sight): an active
// record whose sandbox the provider still runs, or can still attach, is
// adopted and reattached lazily, on its next use; a ready record whose
// sandbox is gone is terminated (reason error, "sandbox lost") and its
// identity gets a fresh context on the next call; a running sandbox that no
// active record of any node names is destroyed. A record of no node (from
// before nodes) whose sandbox the provider runs is claimed first. Records
// stuck in creating are left to the cleanup loop's orphan rule. A store or
// provider failure is logged and skips the step that needs it.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		return errClosed
	case m.started:
		m.mu.Unlock()
		return fmt.Errorf("context manager already started: %w", errdefs.ErrFailedPrecondition)
	}
	m.mu.Unlock()

	if err := m.Heartbeat(ctx); err != nil {
		m.log.Warn("node heartbeat", logkey.Node, m.cfg.Node, logkey.Err, err)
	}
	if m.shared {
		m.reconcileShared(ctx)
	} else {
		m.reconcile(ctx)
	}

	unobserve, err := m.observeStats()
	if err != nil {
		m.log.Warn("metrics: register the gauges", logkey.Err, err)
	}
	m.mu.Lock()
	m.started = true
	m.unobserve = unobserve
	m.mu.Unlock()
	m.resolvePoolSizes(ctx)
	m.poolsWarm(ctx)
	m.wg.Add(1)
	go m.cleanupLoop()
	if m.cfg.Node != "" {
		m.wg.Add(1)
		go m.heartbeatLoop()
		if m.shared {
			m.wg.Add(1)
			go m.leaseLoop()
		}
	}
	return nil
}

func (m *Manager) reconcile(ctx context.Context) {
	running, perr := m.provider.List(ctx)
	if perr != nil {
		m.log.Warn("reconcile: list sandboxes; skipping the sandbox checks", logkey.Err, perr)
	}
	recs, err := m.store.ListActive(ctx)
	if err != nil {
		m.log.Warn("reconcile: list active contexts; skipping reconciliation", logkey.Err, err)
		return
	}
	isRunning := map[string]bool{}
	for _, id := range running {
		isRunning[id] = true
	}
	adopted, lost := 0, 0
	for _, rec := range recs {
		if !m.mine(rec) && !m.claimLegacy(ctx, rec, isRunning) {
			continue // another node's: its own reconcile decides
		}
		switch {
		case rec.State != StateReady || rec.SandboxID == "":
			// creating: the orphan rule decides.
		case perr != nil || isRunning[rec.SandboxID] || m.attachable(ctx, rec.SandboxID):
			m.adopt(rec)
			adopted++
		default:
			if m.terminateRecord(ctx, rec, ReasonError, "sandbox lost") {
				m.markLost(rec.Identity)
				lost++
			}
		}
	}
	killed := 0
	if perr == nil {
		killed = m.sweep(ctx, running, recs, false)
	}
	m.log.Info("reconciled contexts", "adopted", adopted, "lost", lost, "killed", killed)
}

// claimLegacy claims a ready record of no node (written before nodes
// existed) whose sandbox this node's provider runs, and reports whether
// rec is now this node's.
func (m *Manager) claimLegacy(ctx context.Context, rec *Record, running map[string]bool) bool {
	if rec.Node != "" || m.cfg.Node == "" || rec.State != StateReady || !running[rec.SandboxID] {
		return false
	}
	ok, err := m.store.Claim(ctx, rec.ID, "", m.cfg.Node)
	if err != nil || !ok {
		return false
	}
	rec.Node = m.cfg.Node
	return true
}

// attachable reports whether the provider can still reach a sandbox its
// List did not name: an E2B sandbox of another deployment (taken over from
// a node that is gone) or from before deployment ids.
func (m *Manager) attachable(ctx context.Context, sandboxID string) bool {
	sb, err := m.provider.Attach(ctx, sandboxID)
	if err != nil {
		return false
	}
	sb.Close()
	return true
}

func (m *Manager) cleanupLoop() {
	defer m.wg.Done()
	ctx, cancel := m.loopCtx()
	defer cancel()
	t := time.NewTicker(m.cfg.CleanupInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			res, err := m.Cleanup(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				m.log.Warn("cleanup", "cleaned", res.Cleaned, "errors", res.Errors, logkey.Err, err)
			case res.Cleaned > 0:
				m.log.Info("cleanup", "cleaned", res.Cleaned, "errors", res.Errors)
			}
		}
	}
}

// CleanupResult is what one cleanup pass did.
type CleanupResult struct {
	// Cleaned counts the contexts the pass terminated and tore down:
	// expired ones, orphans stuck in creating and, with a shared
	// provider, those whose sandbox is lost. A context another
	// manager ended first is not counted here (that manager counts it).
	Cleaned int
	// Errors counts the failures the pass met and went on past: a store
	// or provider listing that failed (its step was skipped), a context
	// whose termination the store refused (it is tried again next pass).
	// Cleanup's error joins them.
	Errors int
}

// Cleanup runs one pass of the cleanup loop: it terminates expired
// contexts (reason expired) and orphans stuck in creating past
// CreatingTimeout (reason error), destroying their sandboxes, drops the
// contexts it serves that another node ended, and destroys running
// sandboxes that no active record names and that were already unknown at
// the previous pass (the grace protects creations in flight), deletes the
// fork templates no context runs on (forkdrop.go), and removes audit
// events older than AuditRetention.
// Records of another node are left to it while its lease is live. With a
// shared provider, expiry, the ending of records whose sandbox is lost and
// the sweep cover every node's records and run only on the holder of the
// cluster lease, under a context that ends with the lease (lease.go); the
// other nodes expire only the contexts whose record the store lacks. With
// two managers on one store, only the one whose Store.Terminate succeeds
// tears a context down. It returns what it cleaned and how many failures
// it met; the error joins those failures (nil when Errors is 0).
func (m *Manager) Cleanup(ctx context.Context) (res CleanupResult, err error) {
	ctx, span := startSpan(ctx, spanCleanup, Identity{})
	defer func() { endSpan(span, err) }()
	now := m.now()
	cluster, until := m.clusterWork()
	cctx := ctx // the cluster's work: ends with the lease
	if cluster && !until.IsZero() {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(ctx, until)
		defer cancel()
	}
	var errs []error
	defer func() {
		res.Errors = len(errs)
		err = errors.Join(errs...)
	}()
	count := func(won bool, err error) {
		if won {
			res.Cleaned++
		}
		if err != nil {
			errs = append(errs, err)
		}
	}

	// Expired contexts this manager serves (the in-memory copy is the
	// newest when store writes failed). With a shared provider, a node
	// without the lease expires only those the store lacks: the holder
	// ends the others from the store's records.
	m.mu.Lock()
	var mine []*Record
	for _, e := range m.byID {
		if !e.rec.ExpiresAt.After(now) && (!m.shared || cluster || e.unsaved) {
			mine = append(mine, cloneRecord(e.rec))
		}
	}
	m.mu.Unlock()
	for _, rec := range mine {
		_, won, err := m.expire(cctx, rec, now)
		count(won, err)
	}
	alive := m.liveness(ctx)
	for cluster { // the store's expired records: this node's, or all with the lease
		recs, err := m.store.ListExpired(cctx, now, 200)
		if err != nil {
			errs = append(errs, fmt.Errorf("list expired contexts: %w", err))
			break
		}
		progress := false
		for _, rec := range recs {
			if !m.serves(rec) && alive(rec.Node) {
				continue // its node expires it
			}
			left, won, err := m.expire(cctx, rec, now)
			count(won, err)
			if left {
				progress = true
			}
		}
		if len(recs) < 200 || !progress || cctx.Err() != nil {
			break
		}
	}

	// Sandboxes first, then records: a sandbox created after the list is
	// simply not seen; one created before it is named by a record or an
	// entry by the time we read them, or survives thanks to the grace.
	running, perr := m.provider.List(ctx)
	recs, err := m.store.ListActive(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list active contexts: %w", err))
		return res, nil // the deferred func sets Errors and the error
	}
	m.dropEndedElsewhere(ctx, recs)
	for _, rec := range recs {
		if rec.State != StateCreating || now.Before(rec.CreatedAt.Add(m.cfg.CreatingTimeout)) ||
			!m.mine(rec) && alive(rec.Node) {
			continue
		}
		m.mu.Lock()
		mineNow := m.creating[rec.ID]
		m.mu.Unlock()
		if !mineNow {
			count(m.terminateRecordErr(ctx, rec, ReasonError, "stuck in creating"))
		}
	}
	switch {
	case m.shared && !cluster:
		// the lease holder ends lost records and sweeps
	case perr != nil:
		errs = append(errs, fmt.Errorf("list sandboxes: %w", perr))
	case m.shared:
		res.Cleaned += m.endLost(cctx, running, nil, recs)
		if cctx.Err() == nil {
			m.sweep(cctx, running, recs, true)
		}
	default:
		m.sweep(ctx, running, recs, true)
	}
	if cluster && cctx.Err() == nil {
		if err := m.sweepForks(cctx, now); err != nil {
			errs = append(errs, err)
		}
	}
	m.suspendIdle(ctx, now)
	m.sampleUsage(ctx)
	if err := m.pruneAudit(ctx, now); err != nil {
		errs = append(errs, err)
	}
	m.forgetLost(now)
	return res, nil
}

// AuditPruner is implemented by stores that keep an audit trail: the
// cleanup pass removes events older than Config.AuditRetention with it.
type AuditPruner interface {
	// PruneAudit removes at most limit events older than before and
	// returns how many it removed.
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)
}

// pruneBatch bounds one PruneAudit call, so one pass over a big trail
// never holds a long transaction.
const pruneBatch = 10000

// pruneAudit removes the audit events older than the retention, a batch
// at a time, until a batch comes back short. Several managers on one
// store may do it at once: the deletes are idempotent.
func (m *Manager) pruneAudit(ctx context.Context, now time.Time) error {
	p, ok := m.store.(AuditPruner)
	if !ok || m.cfg.AuditRetention < 0 {
		return nil
	}
	before := now.Add(-m.cfg.AuditRetention)
	for ctx.Err() == nil {
		n, err := p.PruneAudit(ctx, before, pruneBatch)
		if err != nil {
			return fmt.Errorf("audit retention: %w", err)
		}
		if n < pruneBatch {
			return nil
		}
	}
	return ctx.Err()
}

// sampleUsage records the resource usage of every active, idle context
// this manager serves, attached or not (Provider.Usage works by id), whose
// provider samples usage: a provider chain samples each sandbox by its own
// provider, and one that cannot (NotSupported) is skipped quietly. It
// reads the record fresh from the store and writes it back right away,
// under the context's exec lock, so the counters it saves are current.
func (m *Manager) sampleUsage(ctx context.Context) {
	if !m.provider.Capabilities().Has(CapUsage) {
		return
	}
	m.mu.Lock()
	var es []*entry
	for _, e := range m.byID {
		if e.rec.SandboxID != "" && e.rec.State == StateReady && !e.rec.Paused() {
			es = append(es, e)
		}
	}
	m.mu.Unlock()
	for _, e := range es {
		select {
		case e.exec <- struct{}{}:
		default:
			continue // executing: next pass
		}
		m.mu.Lock()
		id, tid, sid, unsaved, ended := e.rec.ID, e.rec.TenantID, e.rec.SandboxID, e.unsaved, e.ended
		m.mu.Unlock()
		if !ended {
			if u, err := m.provider.Usage(ctx, sid); errors.Is(err, ErrNotSupported) {
				// this sandbox's provider cannot sample (a chain's)
			} else if err != nil {
				m.log.Debug("sample usage", logkey.Sandbox, sid, logkey.Err, err)
			} else {
				m.mu.Lock()
				e.rec.ResourceUsage = u
				m.mu.Unlock()
				if !unsaved {
					m.saveUsage(ctx, id, tid, u)
				}
			}
		}
		e.exec.unlock()
	}
}

func (m *Manager) saveUsage(ctx context.Context, id, tenantID string, u ResourceUsage) {
	sctx := tctx(ctx, tenantID)
	m.settleID(ctx, id)
	rec, err := m.store.Get(sctx, id)
	if err != nil || !rec.State.Active() {
		return
	}
	rec.ResourceUsage = u
	if err := m.store.Update(sctx, rec); err != nil {
		m.log.Warn("store: save resource usage", logkey.Context, id, logkey.Err, err)
		return
	}
	m.changed(tenantID, id)
}

// expire terminates rec when it is still expired and not executing. It
// reports whether rec left the active states, whether this manager ended
// it, and the store failure met doing so.
func (m *Manager) expire(ctx context.Context, rec *Record, now time.Time) (left, won bool, err error) {
	unlock, err := m.idLocks.lock(ctx, rec.Identity)
	if err != nil {
		return false, false, nil
	}
	defer unlock()
	m.mu.Lock()
	e := m.byID[rec.ID]
	m.mu.Unlock()
	if e == nil {
		if m.autoPause(ctx, rec) {
			return false, false, nil // paused instead (E2B's autoPause)
		}
		won, err := m.terminateRecordErr(ctx, rec, ReasonExpired, "")
		return won, won, err
	}
	m.mu.Lock()
	fixed, end, cur := e.rec.FixedExpiry, e.rec.ExpiresAt, cloneRecord(e.rec)
	m.mu.Unlock()
	if fixed {
		// An absolute expiry ends the context at its time even mid-call,
		// as E2B kills a sandbox at its timeout, commands and all: a
		// command without a timeout cannot keep it alive.
		if end.After(now) {
			return false, false, nil
		}
		if m.autoPause(ctx, cur) {
			return false, false, nil
		}
		won, err := m.endErr(ctx, e, ReasonExpired, "")
		return won, won, err
	}
	select {
	case e.exec <- struct{}{}:
		defer e.exec.unlock()
	default:
		return false, false, nil // executing: it is touched when the call ends
	}
	m.mu.Lock()
	ended, exp, users := e.ended, e.rec.ExpiresAt, e.users
	m.mu.Unlock()
	if ended || exp.After(now) || users > 0 || m.extendedInStore(ctx, e, now) {
		return ended, false, nil
	}
	won, err = m.endErr(ctx, e, ReasonExpired, "")
	return won, won, err
}

// extendedInStore reports whether the store holds a later expiry for e
// than its in-memory copy, one not yet passed at now, and adopts it: a
// write to the record outside this manager (touch_execution_context on
// Postgres, docs/stores.md) extends a context this manager serves too.
// A store that fails to answer leaves the in-memory expiry in force.
func (m *Manager) extendedInStore(ctx context.Context, e *entry, now time.Time) bool {
	m.mu.Lock()
	id, tid, unsaved := e.rec.ID, e.rec.TenantID, e.unsaved
	m.mu.Unlock()
	if unsaved {
		return false
	}
	r, err := m.store.Get(tctx(ctx, tid), id)
	if err != nil || !r.State.Active() || !r.ExpiresAt.After(now) {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.ExpiresAt.After(e.rec.ExpiresAt) {
		e.rec.ExpiresAt, e.rec.LastUsedAt = r.ExpiresAt, r.LastUsedAt
	}
	return true
}

// Close stops the loops, gives the cluster lease up (another node takes
// the cleanup over at once), destroys the warm pools (pooled sandboxes
// have no record and would leak), waits for the warm sandboxes creates
// discarded to be destroyed (destroyLater), and detaches every context
// sandbox, leaving it running for the next Start to reattach. Later calls
// fail with ErrUnavailable.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.stopCh)
	unobserve := m.unobserve
	m.mu.Unlock()
	if unobserve != nil {
		unobserve()
	}

	// The pool's creations under way finish and see the manager closed
	// (poolMake destroys what they made): a runtime killed mid-create can
	// leave a sandbox it cannot account for. They are cut short only when
	// ctx ends first.
	stopMakes := context.AfterFunc(ctx, m.endMakes)
	defer stopMakes()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("close context manager: %w", ctx.Err())
	}
	m.endMakes()
	m.releaseLease(ctx) // the loops have stopped: no cluster work runs here now

	m.mu.Lock()
	var warm, attached []Sandbox
	for _, p := range m.pools {
		warm = append(warm, p.ready...)
		p.ready = nil
	}
	for _, e := range m.byID {
		if e.sb != nil {
			attached = append(attached, e.sb)
			e.sb = nil
		}
		e.ended = true
	}
	m.byID, m.byIdent = map[string]*entry{}, map[Identity]*entry{}
	m.mu.Unlock()
	for _, sb := range warm {
		m.destroy(ctx, sb, sb.ID())
	}
	for _, sb := range attached {
		sb.Close()
	}
	if err := m.waitWriters(ctx); err != nil { // the calls answered are in the store
		return err
	}
	return m.waitDiscards(ctx) // warm sandboxes creates discarded
}
