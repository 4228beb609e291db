package contexts

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
