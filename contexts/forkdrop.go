package contexts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// A fork's template is the fork's own: nothing but the contexts started
// from it needs it, and MCP (fork_sandbox) has no way to delete one. So
// the manager remembers the fork templates it made (forkTemplates) and
// deletes one when a context that ran on it ends, or wakes onto an image
// of its own, and no active context of the tenant runs on it any more
// (dropFork). While a fork's contexts are still being started the
// template is pinned: Fork until its create returns, ForkSnapshot (E2B's
// Sandbox.fork, N contexts from one template) until its caller's ctx is
// done, so a fork of the batch that ends early does not take the
// template from the others.
//
// The store keeps the mark too (ForkMarks: the snapshot row's fork
// column, set when the row is written, never inferred from a name), so
// the cleanup pass (sweepForks) deletes the fork templates no context
// runs on that this manager's memory does not know: a fork made before a
// restart, or on another node of the store, or whose last context ended
// on another node. It leaves alone a template younger than
// Config.ForkGrace (its first context may not have been written yet) and
// one whose store lease "fork/<id>" another node holds: a node holds it
// while the template is pinned there (up to forkLeaseTTL, should that
// node die). docs/state.md, "A fork's template goes with its forks".

// ForkMarks is the store's side of the fork marks; templates.Catalog
// implements it. A Snapshots without it leaves the marks in memory only.
type ForkMarks interface {
	// TakeForkSnapshot is Snapshots.TakeSnapshot with the snapshot marked
	// as a fork's own.
	TakeForkSnapshot(ctx context.Context, tenantID, contextID, template, name string, capture func(ctx context.Context, w io.Writer, max int64) error) (SnapshotInfo, error)
	// ForkTemplates returns, over every tenant, at most limit templates
	// marked as a fork's own and created before before, oldest first.
	ForkTemplates(ctx context.Context, before time.Time, limit int) ([]ForkTemplate, error)
}

// ForkTemplate is a fork's template as the store marks it.
type ForkTemplate struct {
	TenantID, ID string
	CreatedAt    time.Time
}

const (
	// forkLeaseTTL bounds how long a node's pin on a fork template holds
	// off the other nodes' sweeps should the node die while pinned.
	forkLeaseTTL = time.Hour
	// forkSweepBatch bounds the templates one cleanup pass looks at.
	forkSweepBatch = 1000
)

func forkLease(id string) string { return "fork/" + id }

// forkTemplates are the fork templates this manager made.
type forkTemplates struct {
	mu    sync.Mutex
	owned map[string]*forkMark // by template id
}

type forkMark struct {
	tenant string
	pins   int // forks from it still starting
}

// add marks id, tenantID's, as a fork's template, pinned once.
func (f *forkTemplates) add(tenantID, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owned == nil {
		f.owned = map[string]*forkMark{}
	}
	f.owned[id] = &forkMark{tenant: tenantID, pins: 1}
}

// forget drops id's mark (the fork deleted its template itself).
func (f *forkTemplates) forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.owned, id)
}

// unpin takes one pin off id and reports whether that was its last.
func (f *forkTemplates) unpin(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mk := f.owned[id]; mk != nil && mk.pins > 0 {
		mk.pins--
		return mk.pins == 0
	}
	return false
}

// pinned reports whether a fork from id is still starting here.
func (f *forkTemplates) pinned(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	mk := f.owned[id]
	return mk != nil && mk.pins > 0
}

// droppable reports whether id is tenantID's fork template, unpinned.
func (f *forkTemplates) droppable(tenantID, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	mk := f.owned[id]
	return mk != nil && mk.pins == 0 && mk.tenant == tenantID
}

// take removes id's mark if it is still droppable, so that of two ends
// racing only one deletes.
func (f *forkTemplates) take(tenantID, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	mk := f.owned[id]
	if mk == nil || mk.pins > 0 || mk.tenant != tenantID {
		return false
	}
	delete(f.owned, id)
	return true
}

// takeForkSnapshot stores a fork's template (marked in the store when sn
// can) and marks it here, pinned, with the store's lease on it for the
// other nodes' sweeps; the caller unpins it (unpinFork) or forgets it.
func (m *Manager) takeForkSnapshot(ctx context.Context, sn Snapshots, tenantID, contextID, template, name string, capture func(ctx context.Context, w io.Writer, max int64) error) (SnapshotInfo, error) {
	take := sn.TakeSnapshot
	if fm, ok := sn.(ForkMarks); ok {
		take = fm.TakeForkSnapshot
	}
	info, err := take(ctx, tenantID, contextID, template, name, capture)
	if err != nil {
		return SnapshotInfo{}, err
	}
	m.forks.add(tenantID, info.ID)
	if m.cfg.Node != "" {
		// A failure leaves the grace as the only guard: logged, not fatal.
		if ok, err := m.store.AcquireLease(context.WithoutCancel(ctx), forkLease(info.ID), m.cfg.Node, forkLeaseTTL); err != nil || !ok {
			m.log.Warn("fork: no lease on its template", logkey.Template, info.ID, logkey.Err, err)
		}
	}
	return info, nil
}

// releaseFork gives up this node's lease on fork template id.
func (m *Manager) releaseFork(ctx context.Context, id string) {
	if m.cfg.Node == "" {
		return
	}
	if err := m.store.ReleaseLease(context.WithoutCancel(ctx), forkLease(id), m.cfg.Node); err != nil {
		m.log.Warn("fork: lease on its template stays", logkey.Template, id, logkey.Err, err)
	}
}

// forgetFork drops template id's mark and lease: the fork deleted it.
func (m *Manager) forgetFork(ctx context.Context, id string) {
	m.forks.forget(id)
	m.releaseFork(ctx, id)
}

// unpinFork takes a starting fork's pin off template id and drops it if
// no context runs on it (every fork of it failed to start, or ended).
func (m *Manager) unpinFork(ctx context.Context, tenantID, id string) {
	if m.forks.unpin(id) {
		m.releaseFork(ctx, id)
	}
	m.dropFork(ctx, tenantID, id)
}

// dropFork deletes template id when it is a fork's template of
// tenantID's this manager made, no fork from it is still starting and no
// active context of the tenant runs on it. A failure leaves the mark, so
// the next end retries.
func (m *Manager) dropFork(ctx context.Context, tenantID, id string) {
	if id == "" || !m.forks.droppable(tenantID, id) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	sn, err := m.snapshots()
	if err != nil {
		return
	}
	used, err := m.templateInUse(ctx, tenantID, id)
	if err != nil {
		m.log.Warn("fork: its template stays", logkey.Template, id, logkey.Err, err)
		return
	}
	if used || !m.forks.take(tenantID, id) {
		return
	}
	if err := sn.DeleteSnapshot(ctx, tenantID, id); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return // deleted elsewhere: nothing left to mark
		}
		// Marked again, unpinned, so the next end on it retries.
		m.forks.add(tenantID, id)
		m.forks.unpin(id)
		m.log.Warn("fork: its template stays", logkey.Template, id, logkey.Err, err)
		return
	}
	m.log.Info("fork template deleted: no context runs on it", logkey.Tenant, tenantID, logkey.Template, id)
}

// sweepForks deletes, for the cleanup pass, the templates the store marks
// as a fork's own, older than Config.ForkGrace, that no fork here is still
// starting from, no other node holds the lease of and no active context
// of their tenant runs on.
func (m *Manager) sweepForks(ctx context.Context, now time.Time) error {
	fm, ok := m.cfg.Catalog.(ForkMarks)
	if !ok || m.cfg.Catalog == nil {
		return nil
	}
	sn, err := m.snapshots()
	if err != nil {
		return nil // this daemon keeps no snapshots
	}
	ts, err := fm.ForkTemplates(ctx, now.Add(-m.cfg.ForkGrace), forkSweepBatch)
	if err != nil {
		return fmt.Errorf("list fork templates: %w", err)
	}
	var errs []error
	for _, ft := range ts {
		if ctx.Err() != nil {
			break
		}
		if m.forks.pinned(ft.ID) {
			continue
		}
		if m.cfg.Node != "" {
			ok, err := m.store.AcquireLease(ctx, forkLease(ft.ID), m.cfg.Node, forkLeaseTTL)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !ok {
				continue // a fork from it is starting on another node
			}
		}
		if err := m.sweepFork(ctx, sn, ft); err != nil {
			errs = append(errs, err)
		}
		m.releaseFork(ctx, ft.ID)
	}
	return errors.Join(errs...)
}

// sweepFork deletes fork template ft unless a context runs on it.
func (m *Manager) sweepFork(ctx context.Context, sn Snapshots, ft ForkTemplate) error {
	used, err := m.templateInUse(ctx, ft.TenantID, ft.ID)
	if err != nil || used {
		return err
	}
	if err := sn.DeleteSnapshot(ctx, ft.TenantID, ft.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("delete fork template %s: %w", ft.ID, err)
	}
	m.forks.forget(ft.ID)
	m.log.Info("fork template deleted by the sweep: no context runs on it", logkey.Tenant, ft.TenantID, logkey.Template, ft.ID)
	return nil
}

// templateInUse reports whether an active context of tenantID's, on any
// node, runs on template id.
func (m *Manager) templateInUse(ctx context.Context, tenantID, id string) (bool, error) {
	f := Filter{TenantID: tenantID, States: []State{StateCreating, StateReady}, Limit: 100}
	for {
		recs, err := m.store.List(tctx(ctx, tenantID), f)
		if err != nil {
			return false, err
		}
		for _, r := range recs {
			if r.Template == id {
				return true, nil
			}
		}
		if len(recs) < f.Limit {
			return false, nil
		}
		f.After = recs[len(recs)-1].ID
	}
}
