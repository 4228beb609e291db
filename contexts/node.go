package contexts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Nodes. Several daemons may share one store; each is a node (Config.Node)
// and owns the records it created. A node's sandboxes live where only its
// provider can reach them (a local state dir; an E2B deployment), so
// another node must never take their absence from its own provider as a
// loss. The rules, for a manager M:
//
//   - Reconcile and the cleanup of lost or stuck records touch M's own
//     records only (plus, at reconcile, records of no node whose sandbox
//     M's provider runs: they were written before nodes existed).
//   - Expiry: M expires its own records, and those of nodes whose lease
//     has lapsed (no heartbeat for NodeLease) or of no node, so the
//     contexts of a node that never comes back still end.
//   - A call for a context another node owns: refused with unavailable,
//     naming the owner, while its lease is live; taken over (Store.Claim,
//     then attached or replaced like any lost sandbox) once it lapsed.
//
// A shared provider (CapShared) lifts the ownership: every node reaches
// every sandbox, so any node serves any context and claims nothing, and
// the work over all records runs on the holder of the cluster lease
// (lease.go).
//
// docs/contexts-nodes.md ("Nodes") has the argument.

// ownedError refuses a call for a context another live node serves.
type ownedError struct{ id, conversation, path, node string }

func (e ownedError) Error() string {
	return fmt.Sprintf("context %s of conversation %s (path %s) is served by sandlot node %q; "+
		"send this conversation's requests to that node", e.id, e.conversation, e.path, e.node)
}

func (ownedError) Unwrap() error { return errdefs.ErrUnavailable }

// PublicMessage is what the caller reads (errdefs.PublicMessage): where
// to send the call, without the context's id.
func (e ownedError) PublicMessage() string {
	return fmt.Sprintf("This conversation is served by sandlot node %q; send its requests to that node.", e.node)
}

// mine reports whether rec belongs to this manager's node.
func (m *Manager) mine(rec *Record) bool { return rec.Node == m.cfg.Node }

// serves reports whether this manager may serve rec: its own, or any
// record when the provider is shared (every node reaches its sandbox).
func (m *Manager) serves(rec *Record) bool { return m.shared || m.mine(rec) }

// Heartbeat renews this node's lease in the store. Start sends the first
// and a background loop one every NodeLease/4; the unnamed node sends
// none.
func (m *Manager) Heartbeat(ctx context.Context) error {
	if m.cfg.Node == "" {
		return nil
	}
	if err := m.store.Heartbeat(ctx, m.cfg.Node, m.now()); err != nil {
		return fmt.Errorf("renew the lease of node %s: %w", m.cfg.Node, err)
	}
	return nil
}

func (m *Manager) heartbeatLoop() {
	defer m.wg.Done()
	ctx, cancel := m.loopCtx()
	defer cancel()
	t := time.NewTicker(m.cfg.NodeLease / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.Heartbeat(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("node heartbeat; other nodes take over this node's contexts if it lapses", logkey.Node, m.cfg.Node, logkey.Err, err)
			}
		}
	}
}

// alive reports whether node holds a live lease. The unnamed node and a
// node that never sent a heartbeat hold none. When the store cannot say,
// the node counts as alive: nothing is taken from a node on a doubt.
func (m *Manager) alive(ctx context.Context, node string) bool {
	if node == m.cfg.Node {
		return true
	}
	if node == "" {
		return false
	}
	at, err := m.store.LastHeartbeat(ctx, node)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return false
	case err != nil:
		m.log.Warn("store: read a node's lease; leaving its contexts alone", logkey.Node, node, logkey.Err, err)
		return true
	}
	return m.now().Sub(at) < m.cfg.NodeLease
}

// liveness returns alive memoized for one pass over many records.
func (m *Manager) liveness(ctx context.Context) func(node string) bool {
	seen := map[string]bool{}
	return func(node string) bool {
		v, ok := seen[node]
		if !ok {
			v = m.alive(ctx, node)
			seen[node] = v
		}
		return v
	}
}

// servedElsewhere refuses (ownedError) a record that another live node
// serves, or any other node's when this is the unnamed node, which takes
// nothing over.
func (m *Manager) servedElsewhere(ctx context.Context, rec *Record) error {
	if m.serves(rec) || m.cfg.Node != "" && !m.alive(ctx, rec.Node) {
		return nil
	}
	return ownedError{id: rec.ID, conversation: rec.ConversationID, path: rec.PathID, node: rec.Node}
}

// own returns rec once this node owns it: a record of another live node is
// refused (ownedError); one of a node whose lease lapsed, or of no node, is
// claimed. A nil record and nil error mean another node claimed or ended
// it first: the caller reads the store again.
func (m *Manager) own(ctx context.Context, rec *Record) (*Record, error) {
	if m.serves(rec) {
		return rec, nil // a shared provider's: served where it is, never claimed
	}
	if err := m.servedElsewhere(ctx, rec); err != nil {
		return nil, err
	}
	ok, err := m.store.Claim(tctx(ctx, rec.TenantID), rec.ID, rec.Node, m.cfg.Node)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("take over context %s from node %s: %w", rec.ID, rec.Node, err)
	}
	if !ok {
		return nil, nil
	}
	m.log.Info("took over a context whose node's lease lapsed", logkey.Context, rec.ID, logkey.Node, rec.Node)
	gone := rec.Node
	rec.Node = m.cfg.Node
	if rec.State == StateCreating {
		// Its creator is gone: nobody will ever finish it.
		m.terminateRecord(ctx, rec, ReasonError, "stuck in creating: node "+gone+" is gone")
		return nil, nil
	}
	return rec, nil
}

// dropEndedElsewhere drops the contexts this manager serves that another
// node ended (a terminate or path event made there), so the sweep that
// follows, which keeps every sandbox a served context names, can destroy
// their sandboxes. recs is a ListActive result; an entry it lacks is read
// again, because it may have been created after that read.
func (m *Manager) dropEndedElsewhere(ctx context.Context, recs []*Record) {
	active := make(map[string]bool, len(recs))
	for _, r := range recs {
		active[r.ID] = true
	}
	m.mu.Lock()
	var check []*entry
	for id, e := range m.byID {
		if !active[id] && !e.unsaved && !e.ended && !m.creating[id] {
			check = append(check, e)
		}
	}
	m.mu.Unlock()
	for _, e := range check {
		m.mu.Lock()
		id, tid := e.rec.ID, e.rec.TenantID
		m.mu.Unlock()
		rec, err := m.store.Get(tctx(ctx, tid), id)
		if err == nil && rec.State.Active() && m.serves(rec) {
			continue
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			continue // the store cannot say: keep it
		}
		m.log.Info("context ended or taken over elsewhere; dropping it", logkey.Context, id)
		m.drop(e)
	}
}
