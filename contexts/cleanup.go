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
	m.reconcile(ctx)

	unobserve, err := m.observeStats()
	if err != nil {
		m.log.Warn("metrics: register the gauges", logkey.Err, err)
	}
	m.mu.Lock()
	m.started = true
	m.unobserve = unobserve
	m.mu.Unlock()
	m.resolvePoolSizes(ctx)
	m.poolEnsure(m.defaultTemplateID(ctx))
	for t := range *m.poolSizes.Load() {
		m.poolEnsure(t)
	}
	m.wg.Add(1)
	go m.cleanupLoop()
	if m.cfg.Node != "" {
		m.wg.Add(1)
		go m.heartbeatLoop()
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
			if err := m.Cleanup(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("cleanup", logkey.Err, err)
			}
		}
	}
}

// Cleanup runs one pass of the cleanup loop: it terminates expired
// contexts (reason expired) and orphans stuck in creating past
// CreatingTimeout (reason error), destroying their sandboxes, drops the
// contexts it serves that another node ended, and destroys running
// sandboxes that no active record names and that were already unknown at
// the previous pass (the grace protects creations in flight).
// Records of another node are left to it while its lease is live. With two
// managers on one store, only the one whose Store.Terminate succeeds tears
// a context down.
func (m *Manager) Cleanup(ctx context.Context) (err error) {
	ctx, span := startSpan(ctx, spanCleanup, Identity{})
	defer func() { endSpan(span, err) }()
	now := m.now()
	var errs []error

	// Expired contexts this manager serves (the in-memory copy is the
	// newest when store writes failed).
	m.mu.Lock()
	var mine []*Record
	for _, e := range m.byID {
		if !e.rec.ExpiresAt.After(now) {
			mine = append(mine, cloneRecord(e.rec))
		}
	}
	m.mu.Unlock()
	for _, rec := range mine {
		m.expire(ctx, rec, now)
	}
	alive := m.liveness(ctx)
	for {
		recs, err := m.store.ListExpired(ctx, now, 200)
		if err != nil {
			errs = append(errs, fmt.Errorf("list expired contexts: %w", err))
			break
		}
		progress := false
		for _, rec := range recs {
			if !m.mine(rec) && alive(rec.Node) {
				continue // its node expires it
			}
			if m.expire(ctx, rec, now) {
				progress = true
			}
		}
		if len(recs) < 200 || !progress || ctx.Err() != nil {
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
		return errors.Join(errs...)
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
			m.terminateRecord(ctx, rec, ReasonError, "stuck in creating")
		}
	}
	if perr != nil {
		errs = append(errs, fmt.Errorf("list sandboxes: %w", perr))
	} else {
		m.sweep(ctx, running, recs, true)
	}
	m.sampleUsage(ctx)
	return errors.Join(errs...)
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
	rec, err := m.store.Get(sctx, id)
	if err != nil || !rec.State.Active() {
		return
	}
	rec.ResourceUsage = u
	if err := m.store.Update(sctx, rec); err != nil {
		m.log.Warn("store: save resource usage", logkey.Context, id, logkey.Err, err)
	}
}

// expire terminates rec when it is still expired and not executing. It
// reports whether rec left the active states.
func (m *Manager) expire(ctx context.Context, rec *Record, now time.Time) bool {
	unlock, err := m.idLocks.lock(ctx, rec.Identity)
	if err != nil {
		return false
	}
	defer unlock()
	m.mu.Lock()
	e := m.byID[rec.ID]
	m.mu.Unlock()
	if e == nil {
		if m.autoPause(ctx, rec) {
			return false // paused instead (E2B's autoPause)
		}
		return m.terminateRecord(ctx, rec, ReasonExpired, "")
	}
	m.mu.Lock()
	fixed, end, cur := e.rec.FixedExpiry, e.rec.ExpiresAt, cloneRecord(e.rec)
	m.mu.Unlock()
	if fixed {
		// An absolute expiry ends the context at its time even mid-call,
		// as E2B kills a sandbox at its timeout, commands and all: a
		// command without a timeout cannot keep it alive.
		if end.After(now) {
			return false
		}
		if m.autoPause(ctx, cur) {
			return false
		}
		return m.end(ctx, e, ReasonExpired, "")
	}
	select {
	case e.exec <- struct{}{}:
		defer e.exec.unlock()
	default:
		return false // executing: it is touched when the call ends
	}
	m.mu.Lock()
	ended, exp, users := e.ended, e.rec.ExpiresAt, e.users
	m.mu.Unlock()
	if ended || exp.After(now) || users > 0 {
		return ended
	}
	return m.end(ctx, e, ReasonExpired, "")
}

// sweep destroys running sandboxes that no active record, entry or pool
// names. With grace, a sandbox must be unknown at two passes in a row.
// It returns how many it destroyed.
func (m *Manager) sweep(ctx context.Context, running []string, recs []*Record, grace bool) int {
	known := map[string]bool{}
	for _, r := range recs {
		if r.SandboxID != "" {
			known[r.SandboxID] = true
		}
	}
	m.mu.Lock()
	for _, e := range m.byID {
		if e.rec.SandboxID != "" {
			known[e.rec.SandboxID] = true
		}
		if e.sb != nil {
			known[e.sb.ID()] = true
		}
	}
	for _, p := range m.pools {
		for _, sb := range p.ready {
			known[sb.ID()] = true
		}
	}
	prev := m.suspects
	m.mu.Unlock()

	next := map[string]bool{}
	killed := 0
	for _, id := range running {
		if known[id] {
			continue
		}
		if grace && !prev[id] {
			next[id] = true
			continue
		}
		m.log.Info("destroying a sandbox no context owns", logkey.Sandbox, id)
		m.destroy(ctx, nil, id)
		killed++
	}
	m.mu.Lock()
	m.suspects = next
	m.mu.Unlock()
	return killed
}

// Close stops the loops, destroys the warm pools (pooled sandboxes have no
// record and would leak) and detaches every context sandbox, leaving it
// running for the next Start to reattach. Later calls fail with
// ErrUnavailable.
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

	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("close context manager: %w", ctx.Err())
	}

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
	return nil
}
