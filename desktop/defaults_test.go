package desktop

import (
	"testing"
	"time"
)

// TestDefaults: a desktop manager built from a zero Config ends a session
// 15 minutes after its last call (004 §4.1) and waits 3 s for the live
// view's stream (004 §4.2); the values are written out, not the constants.
func TestDefaults(t *testing.T) {
	m := New(Config{})
	if m.cfg.TTL != 15*time.Minute {
		t.Errorf("session TTL %s, want 15m", m.cfg.TTL)
	}
	if m.cfg.StreamWait != 3*time.Second {
		t.Errorf("stream wait %s, want 3s", m.cfg.StreamWait)
	}
}
