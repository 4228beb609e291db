package contexts

// The cleanup pass's sweep: running sandboxes no context, entry or pool
// owns are destroyed, once unknown at two passes with no create under way
// that could own them.

import (
	"context"

	"github.com/sandlot/sandlot/internal/logkey"
)

// sweep destroys running sandboxes that no active record, entry or pool
// names. With grace, a sandbox must be unknown at two passes in a row.
// It returns how many it destroyed.
func (m *Manager) sweep(ctx context.Context, running []string, recs []*Record, grace bool) int {
	// A create begun before the previous sweep and still under way may
	// own a sandbox listed then and now (a runtime lists it from the
	// start): its suspects wait for the next pass. Asked before the
	// owners are listed: a create that ends after this answer is waited
	// for, one that ended before it has its sandbox among the owners. A
	// create begun more than CreatingTimeout ago holds no longer (taken
	// for hung, as a record creating that long on another node is): it
	// must not keep every stray on the node running.
	m.mu.Lock()
	prev, prevMark := m.suspects, m.suspectsMark
	m.mu.Unlock()
	settled := !m.creates.anyBefore(prevMark, m.now().Add(-m.cfg.CreatingTimeout))
	mark := m.creates.mark()

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
	hook := m.sweepListed
	m.mu.Unlock()
	if hook != nil {
		hook()
	}

	next := map[string]bool{}
	killed := 0
	for _, id := range running {
		if known[id] {
			continue
		}
		if grace && (!prev[id] || !settled) {
			next[id] = true
			continue
		}
		m.log.Info("destroying a sandbox no context owns", logkey.Sandbox, id)
		m.destroy(ctx, nil, id)
		killed++
	}
	m.mu.Lock()
	m.suspects, m.suspectsMark = next, mark
	m.mu.Unlock()
	return killed
}
