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
