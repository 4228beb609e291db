package daemon

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestE2BTemplates: --e2b-code-interpreter-template moves E2B's default
// code-interpreter-v1 and nothing else; empty or "default" leaves E2B's
// names as they are.
func TestE2BTemplates(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want map[string]string
	}{
		{"", map[string]string{"base": "", "code-interpreter-v1": "", "code-interpreter": "code-interpreter"}},
		{"default", map[string]string{"base": "", "code-interpreter-v1": "", "code-interpreter": "code-interpreter"}},
		{"code-interpreter", map[string]string{"base": "", "code-interpreter-v1": "code-interpreter", "code-interpreter": "code-interpreter"}},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			if d := cmp.Diff(tc.want, e2bTemplates(tc.flag)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
