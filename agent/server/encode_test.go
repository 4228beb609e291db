package server

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
)

// decodeRunCode decodes b, which must be valid JSON.
func decodeRunCode(t *testing.T, b []byte) agent.RunCodeResult {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %q", b)
	}
	var r agent.RunCodeResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAppendRunCode: the hand-written encoding decodes to what
// encoding/json's decodes to, for every field, escapes and invalid UTF-8
// included; results with raw JSON go through encoding/json.
func TestAppendRunCode(t *testing.T) {
	tricky := "a\"b\\c\n\r\t\x00\x01\x1f\x7f<>&\u2028\u2029é漢\U0001F600\xff\xc3(end"
	for _, tc := range []struct {
		name  string
		r     agent.RunCodeResult
		plain bool
	}{
		{"1+1", agent.RunCodeResult{Success: true, Results: []agent.RichResult{{Main: true, Text: "2"}}, ExecutionCount: 3, DurationMs: 1}, true},
		{"empty", agent.RunCodeResult{}, true},
		{"every field", agent.RunCodeResult{Success: false, Stdout: tricky, Stderr: tricky + "x",
			Results:  []agent.RichResult{{Main: true, Text: tricky, HTML: "<b>", Markdown: "*m*", SVG: "<svg/>", PNG: "iVBO", JPEG: "/9j/", LaTeX: `\frac{1}{2}`, JavaScript: "x()"}, {}},
			Error:    &agent.ExecError{Name: "ValueError", Value: tricky, Traceback: "tb\n" + tricky},
			ExitCode: -1, TimedOut: true, Truncated: true, ExecutionCount: 1 << 40, DurationMs: -5, KernelRestarted: true}, true},
		{"chart", agent.RunCodeResult{Success: true, Results: []agent.RichResult{{PNG: "x", Chart: json.RawMessage(`{"type":"line"}`)}}}, false},
		{"table", agent.RunCodeResult{Success: true, Results: []agent.RichResult{{Data: json.RawMessage(`{"a":[1]}`)}}}, false},
		{"json", agent.RunCodeResult{Success: true, Results: []agent.RichResult{{JSON: json.RawMessage(`[1, 2]`)}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plainRunCode(&tc.r); got != tc.plain {
				t.Fatalf("plainRunCode = %v, want %v", got, tc.plain)
			}
			want, err := json.Marshal(&tc.r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendResult([]byte("prefix"), &tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got[:6]) != "prefix" {
				t.Fatalf("the prefix was lost: %q", got)
			}
			if diff := cmp.Diff(decodeRunCode(t, want), decodeRunCode(t, got[6:])); diff != "" {
				t.Fatalf("decoded differently from encoding/json's (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAppendStringRandom: random bytes, valid UTF-8 or not, decode as
// encoding/json's encoding of the same string decodes.
func TestAppendStringRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		s := string(b)
		want, _ := json.Marshal(s)
		got := appendString(nil, s)
		var ws, gs string
		if err := json.Unmarshal(want, &ws); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &gs); err != nil {
			t.Fatalf("appendString(%q) = %q: %v", s, got, err)
		}
		if ws != gs {
			t.Fatalf("appendString(%q) decodes to %q, encoding/json's to %q", s, gs, ws)
		}
	}
}

func BenchmarkAppendRunCode(b *testing.B) {
	r := &agent.RunCodeResult{Success: true, Results: []agent.RichResult{{Main: true, Text: "2"}}, ExecutionCount: 3, DurationMs: 1}
	b.Run("hand", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf, _ = appendResult(buf[:0], r)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
}
