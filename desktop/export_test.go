package desktop

// PasswordOf is the live view password of a session (tests read it
// without a ports route).
func PasswordOf(m *Manager, contextID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.sessions[contextID]; s != nil {
		return s.password
	}
	return ""
}

// NewBuilderWith is NewBuilder with another recipe (a missing mmdebstrap).
var NewBuilderWith = newBuilder
