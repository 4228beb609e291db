package contexts

import (
	"sync"
	"time"
)

// inflight numbers the sandbox creates under way (a context's create, a
// wake from the files, a warm pool's make) in the order they began, for
// the cleanup pass's sweep: a runtime lists a sandbox from the start of
// its create, long before the create returns and an entry or a pool
// holds it (runsc: seconds under load), so a sandbox no one owns at two
// passes is a stray only if no create that was under way at the first of
// them still is. A create is counted only for a bounded time (anyBefore's
// since): one that hangs must not keep every stray on the node running.
type inflight struct {
	mu   sync.Mutex
	next uint64
	open map[uint64]time.Time // when each create under way began
}

// begin marks a create under way, begun at now; the returned func ends
// it, once what it made is owned (or destroyed).
func (f *inflight) begin(now time.Time) (end func()) {
	f.mu.Lock()
	seq := f.next
	f.next++
	if f.open == nil {
		f.open = map[uint64]time.Time{}
	}
	f.open[seq] = now
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.open, seq)
			f.mu.Unlock()
		})
	}
}

// mark is a point in the order: every create begun before it is below it.
func (f *inflight) mark() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next
}

// anyBefore reports whether a create begun before mark, and not before
// since, is still under way.
func (f *inflight) anyBefore(mark uint64, since time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for seq, began := range f.open {
		if seq < mark && !began.Before(since) {
			return true
		}
	}
	return false
}
