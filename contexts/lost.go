package contexts

import (
	"context"
	"time"
)

// A lost sandbox is replaced transparently, and whoever calls next is told
// that the earlier state is gone (docs/contexts.md, "A lost sandbox").
//
// The manager remembers, per identity, a context that ended because its
// sandbox was lost: found dead by a reuse's health check or attach, by a
// request that could not be sent to it, during a call, at reconcile, or by
// a pause or resume. The identity's next context carries the fact
// (entry.replacedLost) until a call reports it: Execute in
// ExecuteResult.StateLost, Use through StateLost(ctx) inside its callback.
// A call that does not report it (a GetOrCreate, a Use whose callback does
// not ask) leaves it for the next one that does.

// markLost records that id's context ended with its sandbox lost.
func (m *Manager) markLost(id Identity) {
	m.mu.Lock()
	m.lost[id] = m.now()
	m.mu.Unlock()
}

// inheritLost moves id's lost mark onto e, its new context.
// Precondition: mu held.
func (m *Manager) inheritLost(id Identity, e *entry) {
	if _, ok := m.lost[id]; ok {
		e.replacedLost = true
		delete(m.lost, id)
	}
}

// takeReplaced reports whether e replaced a lost context and no call has
// said so yet, and clears it: one call reports it.
func (m *Manager) takeReplaced(e *entry) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := e.replacedLost
	e.replacedLost = false
	return v
}

// forgetLost drops the lost marks older than the TTL: by then the state
// would have expired anyway, and the mark would only grow the map.
func (m *Manager) forgetLost(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, at := range m.lost {
		if now.Sub(at) > m.cfg.TTL {
			delete(m.lost, id)
		}
	}
}

type stateLostKey struct{}

// withStateLost returns ctx for a Use callback on e: StateLost(ctx) asks
// whether e replaced a lost context.
func (m *Manager) withStateLost(ctx context.Context, e *entry) context.Context {
	return context.WithValue(ctx, stateLostKey{}, func() bool { return m.takeReplaced(e) })
}

// StateLost reports, inside a Use callback, whether the call's context
// replaced one whose sandbox was lost, so that none of the earlier calls'
// state (variables, files, installed packages) is in the sandbox the
// callback was given. The first caller to ask gets true, once: an edge
// that shows it in its result asks, one that cannot leaves it for the next
// call. Outside a Use callback it is false.
func StateLost(ctx context.Context) bool {
	f, ok := ctx.Value(stateLostKey{}).(func() bool)
	return ok && f()
}
