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
// the store marks it (ForkMarks: the snapshot row's fork column, set when
// the row is written, never inferred from a name), and the manager deletes
// a marked template when a context that ran on it ends, or wakes onto an
// image of its own, and no active context of the tenant runs on it any
// more (dropFork), whichever node that end is on. While a fork's contexts
// are still being started the template is pinned: Fork until its create
// returns, ForkSnapshot (E2B's Sandbox.fork, N contexts from one template)
// until its caller's ctx is done, so a fork of the batch that ends early
// does not take the template from the others. The pins are the only fork
// state the manager keeps in memory (forkPins), and only while they last:
// a template another node's end or sweep deleted leaves nothing here.
//
// A node holds the store lease "fork/<id>" while it pins template id (up
// to forkLeaseTTL, should that node die): dropFork and the cleanup pass
// (sweepForks) of every other node leave such a template alone. The sweep
// deletes the marked templates no context runs on that no end deleted: a
// fork made before a restart, or whose last end failed to delete it. It
// leaves alone a template younger than Config.ForkGrace (its first context
// may not have been written yet). docs/state-snapshots.md, "A fork's template goes
// with its forks".

// ForkMarks is the store's side of the fork marks; templates.Catalog
// implements it. With a Snapshots without it no template is taken for a
// fork's: nothing deletes them.
type ForkMarks interface {
	// TakeForkSnapshot is Snapshots.TakeSnapshot with the snapshot marked
	// as a fork's own.
	TakeForkSnapshot(ctx context.Context, tenantID, contextID, template, name string, capture func(ctx context.Context, w io.Writer, max int64) error) (SnapshotInfo, error)
	// ForkTemplates returns, over every tenant, at most limit templates
	// marked as a fork's own and created before before, oldest first.
	ForkTemplates(ctx context.Context, before time.Time, limit int) ([]ForkTemplate, error)
	// IsForkTemplate reports whether tenantID's template id is marked as
	// a fork's own; false for any other template, or none.
	IsForkTemplate(ctx context.Context, tenantID, id string) (bool, error)
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

// forkPins counts, per fork template, the forks from it still starting on
// this node. An entry lives only while it has a pin.
type forkPins struct {
	mu   sync.Mutex
	pins map[string]int // by template id
}

// pin adds a pin to id.
func (f *forkPins) pin(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pins == nil {
		f.pins = map[string]int{}
	}
	f.pins[id]++
}

// unpin takes one pin off id and reports whether that was its last.
func (f *forkPins) unpin(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.pins[id]
	if !ok {
		return false
	}
	if n <= 1 {
		delete(f.pins, id)
		return true
	}
	f.pins[id] = n - 1
	return false
}

// pinned reports whether a fork from id is still starting here.
func (f *forkPins) pinned(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pins[id] > 0
}

// len is how many templates are pinned here (tests).
func (f *forkPins) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pins)
}

// takeForkSnapshot stores a fork's template (marked in the store when sn
// can) and pins it here, with the store's lease on it for the other
// nodes; the caller unpins it (unpinFork) or forgets it.
func (m *Manager) takeForkSnapshot(ctx context.Context, sn Snapshots, tenantID, contextID, template, name string, capture func(ctx context.Context, w io.Writer, max int64) error) (SnapshotInfo, error) {
	take := sn.TakeSnapshot
	if fm, ok := sn.(ForkMarks); ok {
		take = fm.TakeForkSnapshot
	}
	info, err := take(ctx, tenantID, contextID, template, name, capture)
	if err != nil {
		return SnapshotInfo{}, err
	}
	m.forks.pin(info.ID)
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

// forgetFork drops template id's pin and lease: the fork deletes it.
func (m *Manager) forgetFork(ctx context.Context, id string) {
	m.forks.unpin(id)
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

// dropFork deletes template id when the store marks it as a fork's
// template of tenantID's, no fork from it is still starting (here, or on
// another node: its lease) and no active context of the tenant runs on
// it. A failure leaves the template and its mark, so the next end, or the
// sweep, retries.
func (m *Manager) dropFork(ctx context.Context, tenantID, id string) {
	if id == "" || m.forks.pinned(id) {
		return
	}
	fm, ok := m.cfg.Catalog.(ForkMarks)
	if !ok || m.cfg.Catalog == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	sn, err := m.snapshots()
	if err != nil {
		return
	}
	fork, err := fm.IsForkTemplate(tctx(ctx, tenantID), tenantID, id)
	if err != nil {
		m.log.Warn("fork: its template stays", logkey.Template, id, logkey.Err, err)
		return
	}
	if !fork {
		return
	}
	if m.cfg.Node != "" {
		ok, err := m.store.AcquireLease(ctx, forkLease(id), m.cfg.Node, forkLeaseTTL)
		if err != nil {
			m.log.Warn("fork: its template stays", logkey.Template, id, logkey.Err, err)
			return
		}
		if !ok {
			return // a fork from it is starting on another node
		}
		defer m.releaseFork(ctx, id)
	}
	used, err := m.templateInUse(ctx, tenantID, id)
	if err != nil {
		m.log.Warn("fork: its template stays", logkey.Template, id, logkey.Err, err)
		return
	}
	if used || m.forks.pinned(id) {
		return
	}
	if err := sn.DeleteSnapshot(ctx, tenantID, id); err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) { // else deleted elsewhere
			m.log.Warn("fork: its template stays", logkey.Template, id, logkey.Err, err)
		}
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
