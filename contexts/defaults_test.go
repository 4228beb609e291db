package contexts

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestManagerDefaults: a manager built from a zero Config runs with the
// session specification's defaults (000 §8.2, §8.3, 001 §5.1, 004 §2.3):
// the values are written out here, not taken from the constants, so a
// changed constant fails.
func TestManagerDefaults(t *testing.T) {
	m := NewManager(nil, nil, Config{})
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"idle TTL", m.cfg.TTL, 30 * time.Minute},
		{"execution timeout", m.cfg.DefaultTimeout, 60 * time.Second},
		{"largest execution timeout", m.cfg.MaxTimeout, 10 * time.Minute},
		{"cleanup interval", m.cfg.CleanupInterval, 60 * time.Second},
		{"contexts per tenant", m.cfg.MaxPerTenant, 10},
		{"contexts per conversation", m.cfg.MaxPerConversation, 5},
		{"executions before rotation", m.cfg.MaxExecutionsPerContext, int64(100)},
		{"warm pool per template", m.cfg.PoolSize, 2},
		{"code size", m.cfg.MaxCodeBytes, 100 * 1024},
		{"default template", m.cfg.DefaultTemplate, "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
