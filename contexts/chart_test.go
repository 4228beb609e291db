package contexts

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
)

// secretGuard redacts one word, enough to see which fields pass the guard.
type secretGuard struct{ Guard }

func (secretGuard) Text(_ context.Context, _, s string) string {
	return strings.ReplaceAll(s, "hunter2", "[REDACTED]")
}

// TestChartGuarded: a chart's labels are sandbox output like any text of a
// result, and the chart stays valid JSON.
func TestChartGuarded(t *testing.T) {
	r := guardRich(context.Background(), secretGuard{}, "t", agent.RichResult{
		Chart: json.RawMessage(`{"type":"bar","title":"pw hunter2","elements":[{"label":"hunter2","value":1,"group":""}]}`),
	})
	if strings.Contains(string(r.Chart), "hunter2") || !json.Valid(r.Chart) || !strings.Contains(string(r.Chart), "[REDACTED]") {
		t.Fatalf("chart %s", r.Chart)
	}
}
