package contexts

import (
	"context"
	"encoding/json"
	"regexp"
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

// cardGuard redacts 16-digit runs, as the real guard's card rule may.
type cardGuard struct{ Guard }

func (cardGuard) Text(_ context.Context, _, s string) string {
	return regexp.MustCompile(`\d{16}`).ReplaceAllString(s, "[REDACTED:CARD]")
}

// TestGuardJSONShape: when the guard redacts inside a JSON result, the
// document keeps its shape and key order: strings are redacted in place;
// integers too (becoming the redaction's string), except in a chart, whose
// numbers are coordinates; floats pass (a log-scale chart's
// 6220781239412467.5 is a measurement). The result is never turned into one
// JSON string.
func TestGuardJSONShape(t *testing.T) {
	cases := []struct {
		name, in, chart, data string
	}{
		{"float passes", `{"type":"line","points":[[36.3,6220781239412467.5],[1,2e+16]]}`,
			`{"type":"line","points":[[36.3,6220781239412467.5],[1,2e+16]]}`,
			`{"type":"line","points":[[36.3,6220781239412467.5],[1,2e+16]]}`},
		{"integer", `{"b":4111111111111111,"a":[true,null,"x"]}`,
			`{"b":4111111111111111,"a":[true,null,"x"]}`,
			`{"b":"[REDACTED:CARD]","a":[true,null,"x"]}`},
		{"string and key", `{"4111111111111111":"card 4111111111111111","z":1,"y":{}}`,
			`{"[REDACTED:CARD]":"card [REDACTED:CARD]","z":1,"y":{}}`,
			`{"[REDACTED:CARD]":"card [REDACTED:CARD]","z":1,"y":{}}`},
		{"not json", `card 4111111111111111`, `"card [REDACTED:CARD]"`, `"card [REDACTED:CARD]"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := guardRich(context.Background(), cardGuard{}, "t", agent.RichResult{Chart: json.RawMessage(c.in), Data: json.RawMessage(c.in)})
			if string(r.Chart) != c.chart {
				t.Errorf("chart %s, want %s", r.Chart, c.chart)
			}
			if string(r.Data) != c.data {
				t.Errorf("data %s, want %s", r.Data, c.data)
			}
		})
	}
}
