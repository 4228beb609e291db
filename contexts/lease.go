package contexts

import (
	"context"
	"errors"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// The cluster lease. With a shared provider (CapShared) every node serves
// every context, so the work over all of them must run once across the
// nodes: expiry, ending records whose sandbox is lost, the sweep of
// sandboxes no record names, and the warm pool. It runs on the node that
// holds the store's lease LeaseCleanup (Store.AcquireLease).
//
// The holder stops before anyone else can start: it reads its clock
// (monotonic) before each acquire or renewal, and counts the lease as its
// own until then plus LeaseTTL, less 1% for clocks that run at slightly
// different rates. The store never lets the lease go before LeaseTTL
// after the call reached it, which is later. Cluster work runs under a
// context whose deadline is that instant, so a store statement or
// provider call in flight is cancelled when the lease ends; a Destroy
// already sent may still complete, which is harmless (teardowns are
// won by Store.Terminate, and destroying a gone sandbox is no error).
// Renewals come every LeaseTTL/3: two may fail in a row before the lease
// is lost.
//
// Node-local work stays on every node: its own stuck creations, the
// contexts it serves that another node ended, usage samples, and
// everything of a provider that is not shared.

// LeaseCleanup names the cluster lease of the cleanup work.
const LeaseCleanup = "cleanup"

// leaseMargin is the share of LeaseTTL a holder gives up for clock rates.
const leaseMargin = 100 // 1/100

// clusterWork reports whether this manager does the work over every
// node's contexts now, and until when (zero: no end). A manager whose
// provider is not shared does it for its own records, always; the
// unnamed node is alone on its store and needs no lease.
func (m *Manager) clusterWork() (bool, time.Time) {
	if !m.shared || m.cfg.Node == "" {
		return true, time.Time{}
	}
	m.leaseMu.Lock()
	until := m.leaseUntil
	m.leaseMu.Unlock()
	return time.Now().Before(until), until
}

// HoldsLease reports whether this manager holds the cluster lease now
// (always true when it needs none: a provider that is not shared, or the
// unnamed node).
func (m *Manager) HoldsLease() bool {
	ok, _ := m.clusterWork()
	return ok
}

// renewLease takes or renews the cluster lease and reports whether this
// manager holds it now. A store failure leaves the lease as it was: it
// lapses at its time unless a later renewal succeeds.
func (m *Manager) renewLease(ctx context.Context) bool {
	ttl := m.cfg.LeaseTTL
	before := time.Now()
	ok, err := m.store.AcquireLease(ctx, LeaseCleanup, m.cfg.Node, ttl)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			m.log.Warn("renew the cluster lease; the cleanup stops when it lapses", logkey.Node, m.cfg.Node, logkey.Err, err)
		}
	case ok:
		m.leaseMu.Lock()
		if u := before.Add(ttl - ttl/leaseMargin); u.After(m.leaseUntil) {
			m.leaseUntil = u
		}
		m.leaseMu.Unlock()
	}
	held, _ := m.clusterWork()
	return held
}

// leaseLoop renews the cluster lease every LeaseTTL/3 and acts on its
// changes: a node that takes it reconciles every record and fills the
// pools; one that loses it empties its pools, whose sandboxes the next
// holder's sweep would otherwise take for strays.
func (m *Manager) leaseLoop() {
	defer m.wg.Done()
	ctx, cancel := m.loopCtx()
	defer cancel()
	t := time.NewTicker(m.cfg.LeaseTTL / 3)
	defer t.Stop()
	held := m.HoldsLease()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := m.renewLease(ctx)
		switch {
		case now && !held:
			m.log.Info("took the cluster lease: this node runs expiry, lost records, the sweep and the warm pool", logkey.Node, m.cfg.Node)
			m.tookLease(ctx)
		case !now && held:
			m.log.Info("lost the cluster lease: another node runs the cleanup", logkey.Node, m.cfg.Node)
			m.drainPools()
		}
		held = now
	}
}

// tookLease does what a new holder owes the cluster: it ends the records
// whose sandbox is gone (the previous holder may have died before it
// looked) and fills the warm pools.
func (m *Manager) tookLease(ctx context.Context) {
	ok, until := m.clusterWork()
	if !ok {
		return
	}
	lctx, cancel := context.WithDeadline(ctx, until)
	running, perr := m.provider.List(lctx)
	recs, err := m.store.ListActive(lctx)
	if err == nil {
		m.endLost(lctx, running, perr, recs)
	}
	cancel()
	m.poolsWarm(ctx)
}

// reconcileShared is Start's reconcile for a shared provider: the node
// that takes the cluster lease ends the records whose sandbox is gone.
// Nothing is adopted (a call loads its context on any node) and nothing
// is swept without the grace: another node may be creating a sandbox
// right now that no record names yet; the cleanup pass sweeps with it.
func (m *Manager) reconcileShared(ctx context.Context) {
	if m.cfg.Node != "" {
		m.renewLease(ctx)
	}
	ok, until := m.clusterWork()
	if !ok {
		m.log.Info("reconcile: another node holds the cluster lease and reconciles", logkey.Node, m.cfg.Node)
		return
	}
	if !until.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, until)
		defer cancel()
	}
	running, perr := m.provider.List(ctx)
	recs, err := m.store.ListActive(ctx)
	if err != nil {
		m.log.Warn("reconcile: list active contexts; skipping reconciliation", logkey.Err, err)
		return
	}
	lost := m.endLost(ctx, running, perr, recs)
	m.log.Info("reconciled contexts", "lost", lost, "shared", true)
}

// endLost ends, as lost, every ready record whose sandbox the shared
// provider neither lists nor attaches: the provider's answer, not a
// node's, judges a sandbox every node reaches. running is a List made
// before recs was read, so a sandbox it misses was either made since (and
// attaches) or is gone. It returns how many it ended.
func (m *Manager) endLost(ctx context.Context, running []string, perr error, recs []*Record) int {
	if perr != nil {
		m.log.Warn("lost records: list sandboxes; skipping", logkey.Err, perr)
		return 0
	}
	isRunning := make(map[string]bool, len(running))
	for _, id := range running {
		isRunning[id] = true
	}
	lost := 0
	for _, rec := range recs {
		if ctx.Err() != nil {
			break
		}
		if rec.State != StateReady || rec.SandboxID == "" || isRunning[rec.SandboxID] || !m.attachLost(ctx, rec.SandboxID) {
			continue
		}
		if ctx.Err() != nil {
			break // the attach failed because the lease ended, not the sandbox
		}
		if m.terminateRecord(ctx, rec, ReasonError, "sandbox lost") {
			m.markLost(rec.Identity)
			lost++
		}
	}
	if lost > 0 {
		m.log.Info("ended contexts whose sandbox is lost", "lost", lost)
	}
	return lost
}

// attachLost reports whether the shared provider says, by answering an
// attach with not_found, that a sandbox is lost. Any other failure (the
// cluster's API server, the network to the pod, a lease that ended) says
// nothing of the sandbox: its record is left for the next pass.
func (m *Manager) attachLost(ctx context.Context, sandboxID string) bool {
	sb, err := m.provider.Attach(ctx, sandboxID)
	if err == nil {
		sb.Close()
		return false
	}
	if !errors.Is(err, errdefs.ErrNotFound) {
		if ctx.Err() == nil {
			m.log.Warn("lost records: attach a sandbox; leaving its record for the next pass", logkey.Sandbox, sandboxID, logkey.Err, err)
		}
		return false
	}
	return true
}

// drainPools destroys the warm sandboxes of every pool, and those being
// made now when they are done (a node that lost the cluster lease).
func (m *Manager) drainPools() {
	m.mu.Lock()
	var stale []Sandbox
	for _, p := range m.pools {
		stale = append(stale, p.ready...)
		p.ready = nil
		p.gen++
	}
	m.mu.Unlock()
	for _, sb := range stale {
		m.destroy(context.Background(), sb, sb.ID())
	}
}

// releaseLease gives the cluster lease up at Close, once the loops have
// stopped, so another node takes the work over at once.
func (m *Manager) releaseLease(ctx context.Context) {
	if !m.shared || m.cfg.Node == "" {
		return
	}
	m.leaseMu.Lock()
	m.leaseUntil = time.Time{}
	m.leaseMu.Unlock()
	if err := m.store.ReleaseLease(ctx, LeaseCleanup, m.cfg.Node); err != nil {
		m.log.Warn("release the cluster lease; another node takes it when it lapses", logkey.Node, m.cfg.Node, logkey.Err, err)
	}
}
