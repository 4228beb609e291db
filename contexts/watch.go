package contexts

import (
	"sync"
)

// Change names one context whose record this manager wrote: created,
// ready, used (executions, expiry), re-networked, paused, or ended. It
// carries no record: a watcher reads the record again, scoped to its own
// tenant, so what it is shown is what Get would show it.
type Change struct {
	TenantID  string
	ContextID string
}

// maxPending bounds the changes a watcher has not taken yet; past it the
// watcher is told to read everything again (Watcher.Resync).
const maxPending = 1024

// Watcher receives the changes of one tenant's contexts, or of every
// tenant's (Manager.Watch). Publishing never blocks: changes coalesce by
// context until the watcher takes them.
type Watcher struct {
	tenant string // "": every tenant
	ready  chan struct{}

	mu      sync.Mutex
	pending map[Change]struct{}
	resync  bool
}

// Ready is signalled when changes are waiting; Take them.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Take returns the changes waiting, and whether some were dropped (more
// than maxPending waited): then the watcher should list again.
func (w *Watcher) Take() (changes []Change, resync bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.pending {
		changes = append(changes, c)
	}
	clear(w.pending)
	resync, w.resync = w.resync, false
	return changes, resync
}

func (w *Watcher) offer(c Change) {
	if w.tenant != "" && w.tenant != c.TenantID {
		return
	}
	w.mu.Lock()
	if len(w.pending) >= maxPending {
		w.resync = true
	} else {
		w.pending[c] = struct{}{}
	}
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// watchers are the manager's Watchers; their own lock, never held while
// taking mu.
type watchers struct {
	mu  sync.Mutex
	set map[*Watcher]struct{}
}

// Watch returns a Watcher of tenantID's contexts ("" every tenant's: the
// admin's console) and the function that stops it. Only the changes this
// manager makes are seen; a context another daemon serves (a shared
// store) shows when this one next writes it.
func (m *Manager) Watch(tenantID string) (*Watcher, func()) {
	w := &Watcher{tenant: tenantID, ready: make(chan struct{}, 1), pending: map[Change]struct{}{}}
	m.watch.mu.Lock()
	if m.watch.set == nil {
		m.watch.set = map[*Watcher]struct{}{}
	}
	m.watch.set[w] = struct{}{}
	m.watch.mu.Unlock()
	return w, func() {
		m.watch.mu.Lock()
		delete(m.watch.set, w)
		m.watch.mu.Unlock()
	}
}

// changed tells the watchers that the record of contextID (of tenantID)
// was written.
func (m *Manager) changed(tenantID, contextID string) {
	c := Change{TenantID: tenantID, ContextID: contextID}
	m.watch.mu.Lock()
	defer m.watch.mu.Unlock()
	for w := range m.watch.set {
		w.offer(c)
	}
}
