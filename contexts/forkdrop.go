package contexts

import (
	"context"
	"errors"
	"sync"

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
// template from the others. The marks live in memory: a template of a
// fork made before a restart, or on another node, stays (a snapshot of
// the tenant's, deleted as any other). docs/state.md, "Fork".

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

// unpin takes one pin off id.
func (f *forkTemplates) unpin(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mk := f.owned[id]; mk != nil && mk.pins > 0 {
		mk.pins--
	}
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

// unpinFork takes a starting fork's pin off template id and drops it if
// no context runs on it (every fork of it failed to start, or ended).
func (m *Manager) unpinFork(ctx context.Context, tenantID, id string) {
	m.forks.unpin(id)
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
