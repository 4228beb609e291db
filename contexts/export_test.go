package contexts

import (
	"context"
	"time"
)

// Kill stops m as a killed process stops: its loops end (no lease is
// renewed or given up), calls are refused, and nothing is destroyed or
// detached: its sandboxes, its warm pool's too, keep running. A function,
// not a method, so the documented Manager API stays the product's.
func Kill(m *Manager) {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.stopCh)
	}
	m.mu.Unlock()
	m.wg.Wait()
	m.waitWriters(context.Background()) // a killed process writes nothing after
}

// Settle waits until the store has every execution m answered so far
// (they are written behind their answers), for a test that reads the
// store itself.
func Settle(m *Manager) { m.settleAll(context.Background()) }

// SetProviderBound sets the bound on a suspend's capture and checkpoint
// (providerBound), for a test of a provider that never answers.
func SetProviderBound(m *Manager, d time.Duration) {
	m.mu.Lock()
	m.providerBound = d
	m.mu.Unlock()
}

// SetTallyDelay sets how long after a call its store write waits
// (tallyDelay), for a test that must see the calls of a while share one
// write. Call it before the manager's first call.
func SetTallyDelay(m *Manager, d time.Duration) {
	m.mu.Lock()
	m.tallyDelay = d
	m.mu.Unlock()
}

// LockWaiters reports how many calls hold or wait for id's identity lock,
// for a test that must know a call is waiting on it.
func LockWaiters(m *Manager, id Identity) int {
	m.idLocks.mu.Lock()
	defer m.idLocks.mu.Unlock()
	if l := m.idLocks.m[id]; l != nil {
		return l.refs
	}
	return 0
}

// PoolWaiting reports how many creates wait for a warm sandbox of template
// (any of its pools) being made, for a test that must know one waits.
func PoolWaiting(m *Manager, template string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, p := range m.pools {
		if k.template == template {
			n += p.waiting
		}
	}
	return n
}

// SetPoolWait bounds m's creates' waits for a warm sandbox being made
// (0: twice the recent creation time), so a test does not race that bound.
func SetPoolWait(m *Manager, d time.Duration) {
	m.mu.Lock()
	m.poolWaitMax = d
	m.mu.Unlock()
}

// ForkEntries reports how many fork templates m keeps state of in memory.
func ForkEntries(m *Manager) int { return m.forks.len() }

// SetSweepListed makes each of m's sweeps call f right after it listed the
// sandboxes' owners, for a test of a create that ends at that moment.
func SetSweepListed(m *Manager, f func()) {
	m.mu.Lock()
	m.sweepListed = f
	m.mu.Unlock()
}
