package tools

import (
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// TestLifecycleTold: the code tools' descriptions and Lifecycle tell a
// model what survives between calls and what ends it, with the values the
// registry was configured with.
func TestLifecycleTold(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
		not  []string
	}{
		{"defaults", Config{}, []string{"after 30 minutes without a call", "after 100 code executions"}, nil},
		{"configured", Config{TTL: 90 * time.Minute, MaxExecutions: 7}, []string{"after 90 minutes without a call", "after 7 code executions"}, []string{"100"}},
		{"no rotation", Config{TTL: 2 * time.Hour, MaxExecutions: -1}, []string{"after 2 hours without a call"}, []string{"code executions"}},
		{"per-context TTL", Config{TTL: time.Hour, Create: contexts.CreateOptions{TTL: 45 * time.Second}}, []string{"after 45 seconds without a call"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(newFake(t), tc.cfg)
			texts := map[string]string{"Lifecycle": r.Lifecycle()}
			for _, tool := range r.Tools() {
				texts[tool.Name] = tool.Description
			}
			for name, keeps := range map[string]string{
				"run_code": "variables, imports, files and the packages you install", "run_analysis": "variables, files",
				"bash": "files and the packages you install", "Lifecycle": "variables, files",
			} {
				text := texts[name]
				for _, w := range append([]string{keeps, "ephemeral", "stateLost", "rotated", "new branch"}, tc.want...) {
					if w == "rotated" && tc.cfg.MaxExecutions < 0 {
						continue
					}
					if !strings.Contains(text, w) {
						t.Errorf("%s does not say %q: %s", name, w, text)
					}
				}
				for _, w := range tc.not {
					if strings.Contains(text, w) {
						t.Errorf("%s says %q: %s", name, w, text)
					}
				}
			}
			if strings.Contains(texts["read_file"], "ephemeral") {
				t.Errorf("read_file carries the lifecycle: %s", texts["read_file"])
			}
		})
	}
}
