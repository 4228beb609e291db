package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// runCodeFrame is a response frame for call id carrying r, written by
// encoding/json (as the agent's own encoder writes it when escapeHTML is
// off: same fields, order and omitempty).
func runCodeFrame(t testing.TB, id uint64, r *RunCodeResult, escapeHTML bool) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":%s}`, id, bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

var runCodeSamples = []RunCodeResult{
	{Success: true, Results: []RichResult{{Main: true, Text: "2"}}, ExecutionCount: 1, DurationMs: 0},
	{Success: true, Stdout: "hello\n", ExecutionCount: 12, DurationMs: 3},
	{Stderr: "boom", Error: &ExecError{Name: "ZeroDivisionError", Value: "division by zero", Traceback: "Traceback:\n  <cell>\n\tx = 1/0"}, ExitCode: 1, ExecutionCount: 2, DurationMs: 41},
	{Stdout: "quotes \" backslash \\ nul \x00 bell \x07 del \x7f", ExitCode: -1, TimedOut: true, Truncated: true, KernelRestarted: true, ExecutionCount: 0, DurationMs: 999999999999},
	{Success: true, Stdout: "héllo wörld ✓ 😀 \u2028 <b>&amp;</b>", Results: []RichResult{
		{HTML: "<table></table>", Markdown: "# t", SVG: "<svg/>", PNG: "iVBORw0KGgo=", JPEG: "/9j/", LaTeX: `$x^2$`, JavaScript: "alert(1)"},
		{Main: true, Text: "a"},
		{},
	}, ExecutionCount: 7},
	{},
}

// TestDecodeRunCodeFrame: the agent's layout takes the fast path and gives
// what was encoded, HTML-escaped or not.
func TestDecodeRunCodeFrame(t *testing.T) {
	for i, want := range runCodeSamples {
		for _, esc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/escapeHTML=%v", i, esc), func(t *testing.T) {
				line := runCodeFrame(t, 42, &want, esc)
				var got RunCodeResult
				if !decodeRunCodeFrame(line, 42, &got) {
					t.Fatalf("fast path refused %s", line)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("decoded (-want +got):\n%s", d)
				}
				if decodeRunCodeFrame(line, 41, &got) {
					t.Error("accepted the frame for another call")
				}
			})
		}
	}
}

// TestDecodeRunCodeFrameRefuses: what the fast path leaves to
// encoding/json (which may accept or reject it): anything off the agent's
// layout or not decodable the same way by hand.
func TestDecodeRunCodeFrameRefuses(t *testing.T) {
	const tail = `,"exitCode":0,"executionCount":1,"durationMs":2}}`
	head := `{"jsonrpc":"2.0","id":7,"result":{"success":true,"stdout":`
	for name, line := range map[string]string{
		"surrogate pair":      head + `"\ud83d\ude00","stderr":""` + tail,
		"lone surrogate":      head + `"\ud800","stderr":""` + tail,
		"invalid utf-8":       head + "\"\xff\",\"stderr\":\"\"" + tail,
		"control character":   head + "\"a\nb\",\"stderr\":\"\"" + tail,
		"unknown escape":      head + `"\x41","stderr":""` + tail,
		"short \\u":           head + `"\u12","stderr":""` + tail,
		"unterminated":        head + `"abc`,
		"float":               head + `"","stderr":"","exitCode":1.0,"executionCount":1,"durationMs":2}}`,
		"exponent":            head + `"","stderr":"","exitCode":1e2,"executionCount":1,"durationMs":2}}`,
		"leading zero":        head + `"","stderr":"","exitCode":01,"executionCount":1,"durationMs":2}}`,
		"huge number":         head + `"","stderr":"","exitCode":0,"executionCount":1,"durationMs":123456789012345678901}}`,
		"id leading zero":     `{"jsonrpc":"2.0","id":07,"result":{"success":true,"stdout":"","stderr":""` + tail,
		"space":               head + ` "","stderr":""` + tail,
		"trailing newline":    head + `"","stderr":""` + tail + "\n",
		"trailing garbage":    head + `"","stderr":""` + tail + `x`,
		"extra key":           head + `"","stderr":"","extra":1` + tail,
		"order":               `{"jsonrpc":"2.0","id":7,"result":{"stdout":"","success":true,"stderr":""` + tail,
		"empty results":       head + `"","stderr":"","results":[]` + tail,
		"raw json result":     head + `"","stderr":"","results":[{"json":{"a":1}}]` + tail,
		"empty rich string":   head + `"","stderr":"","results":[{"text":""}]` + tail,
		"duplicate rich key":  head + `"","stderr":"","results":[{"text":"a","text":"b"}]` + tail,
		"main false":          head + `"","stderr":"","results":[{"main":false}]` + tail,
		"timedOut false":      head + `"","stderr":"","exitCode":0,"timedOut":false,"executionCount":1,"durationMs":2}}`,
		"error null":          head + `"","stderr":"","error":null` + tail,
		"error frame":         `{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"x"}}`,
		"result then error":   head + `"","stderr":""` + tail[:len(tail)-1] + `,"error":{"code":1,"message":"x"}}`,
		"nothing after head":  `{"jsonrpc":"2.0","id":7,"result":`,
		"truncated literal":   head + `"","stderr":"","exitCode":0,"executionCount":1,"durationMs":`,
		"truncated result":    head + `"","stderr":"","exitCode":0,"executionCount":1,"durationMs":2`,
		"negative no digits":  head + `"","stderr":"","exitCode":-,"executionCount":1,"durationMs":2}}`,
		"bool not a bool":     `{"jsonrpc":"2.0","id":7,"result":{"success":tru,"stdout":"","stderr":""` + tail,
		"bad error object":    head + `"","stderr":"","error":{"name":"a","value":"b"}` + tail,
		"results not closed":  head + `"","stderr":"","results":[{"text":"a"}` + tail,
		"results bad element": head + `"","stderr":"","results":[1]` + tail,
	} {
		t.Run(name, func(t *testing.T) {
			var got RunCodeResult
			if decodeRunCodeFrame([]byte(line), 7, &got) {
				t.Errorf("fast path accepted %q: %+v", line, got)
			}
		})
	}
}

// FuzzRunCodeFrame: whatever the fast path accepts, encoding/json accepts
// as a response to the same call, with the same result.
func FuzzRunCodeFrame(f *testing.F) {
	for _, r := range runCodeSamples {
		f.Add(runCodeFrame(f, 3, &r, false))
		f.Add(runCodeFrame(f, 3, &r, true))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{"success":true,"stdout":"\ud83d\ude00","stderr":"","exitCode":0,"executionCount":1,"durationMs":2}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{"success":true,"stdout":"","stderr":"","results":[{"main":true,"text":"\u0041\/"}],"exitCode":-0,"executionCount":1,"durationMs":2}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		id, ok := resultHead(line)
		if !ok {
			return
		}
		var fast RunCodeResult
		if !decodeRunCodeFrame(line, id, &fast) {
			if d := cmp.Diff(RunCodeResult{}, fast); d != "" {
				t.Fatalf("refused but wrote the destination:\n%s", d)
			}
			return
		}
		var ref RunCodeResult
		rf := resultFrame{Result: &ref}
		if err := json.Unmarshal(line, &rf); err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v): %q", err, line)
		}
		if rf.JSONRPC != "2.0" || rf.ID == nil || *rf.ID != id || rf.Method != "" || rf.Error != nil {
			t.Fatalf("fast path accepted a frame that is not a result for call %d: %q", id, line)
		}
		if d := cmp.Diff(ref, fast); d != "" {
			t.Fatalf("fast path and encoding/json differ on %q (-json +fast):\n%s", line, d)
		}
	})
}

// BenchmarkDecodeRunCodeFrame: a warm python 1+1 result, by hand and by
// encoding/json.
func BenchmarkDecodeRunCodeFrame(b *testing.B) {
	line := runCodeFrame(b, 9, &runCodeSamples[0], false)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r RunCodeResult
			if !decodeRunCodeFrame(line, 9, &r) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r RunCodeResult
			rf := resultFrame{Result: &r}
			if err := json.Unmarshal(line, &rf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
