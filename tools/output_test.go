package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

func TestDetectOutputType(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", OutputText},
		{"object", `{"a": 1}`, OutputJSON},
		{"array", "[1, 2,\n 3]\n", OutputJSON},
		{"scalar is text", "42", OutputText},
		{"broken json", `{"a": `, OutputText},
		{"csv", "name,age\nann,3\nbob,4\n", OutputTable},
		{"tsv", "name\tage\nann\t3\n", OutputTable},
		{"markdown", "| a | b |\n|---|:---:|\n| 1 | 2 |\n", OutputTable},
		{"pandas frame", "   name  age\n0   ann    3\n1   bob   41\n", OutputTable},
		{"pandas describe", "             age\ncount   2.000000\nmean   22.000000\n", OutputTable},
		{"captioned", "Results:\nname,age\nann,3\n", OutputTable},
		{"prose", "Hello world.\nThis is a sentence, with a comma.\nAnother line here.\n", OutputText},
		{"one line", "hello, world", OutputText},
		{"traceback", "Traceback (most recent call last):\n  File \"<stdin>\", line 1\nNameError: x\n", OutputText},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := DetectOutputType(tc.in); got != tc.want {
				t.Errorf("DetectOutputType(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	s := strings.Repeat("é", DefaultMaxOutput) // 2 bytes per rune: byte length is over the bound
	if got, cut := truncate(s, DefaultMaxOutput); cut || got != s {
		t.Errorf("exactly %d runes was cut", DefaultMaxOutput)
	}
	got, cut := truncate(s+"xyz", DefaultMaxOutput)
	if !cut || !strings.HasPrefix(got, s) || !strings.Contains(got, "[truncated: 50000 of 50003 characters shown]") {
		t.Errorf("truncate over the bound: cut=%v tail=%q", cut, got[len(got)-60:])
	}
	if !utf8.ValidString(got) {
		t.Error("truncation split a rune")
	}
}

func TestRunCodeOutputHandling(t *testing.T) {
	f := newFake(t)
	big := strings.Repeat("a", 60000)
	f.canned = &agent.RunCodeResult{
		Success: true,
		Stdout:  big,
		Stderr:  "warn",
		Results: []agent.RichResult{
			{Main: true, Text: big, JSON: json.RawMessage(`"` + big + `"`)},
			{PNG: strings.Repeat("A", 60000)},
		},
		DurationMs: 12,
	}
	r := New(f, Config{})
	v, err := r.Call(context.Background(), Call{Name: "run_code", Identity: testID, Forced: true,
		Args: json.RawMessage(`{"language":"python","code":"print('a'*60000)","timeout":5000}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := v.(*RunCodeResult)
	if !res.Truncated || utf8.RuneCountInString(res.Stdout) > DefaultMaxOutput+100 || !strings.HasPrefix(res.Stdout, big[:DefaultMaxOutput]) {
		t.Errorf("stdout not truncated: truncated=%v len=%d", res.Truncated, len(res.Stdout))
	}
	if res.Stderr != "warn" || res.ExecutionTimeMs != 12 || res.SandboxID != "fake-sb" {
		t.Errorf("result fields: %+v", res)
	}
	if len(res.Results[0].JSON) != 0 || len(res.Results[0].Text) > DefaultMaxOutput+100 {
		t.Errorf("oversized JSON result kept: json %d text %d", len(res.Results[0].JSON), len(res.Results[0].Text))
	}
	if len(res.Results[1].PNG) != 60000 {
		t.Error("image was truncated")
	}
	if res.OutputType != OutputText {
		t.Errorf("outputType = %s", res.OutputType)
	}
	if got := f.requests[0]; got.Language != "python" || got.Timeout.Milliseconds() != 5000 {
		t.Errorf("execute request = %+v", got)
	}

	// Under the bound nothing is cut; a configured smaller bound applies.
	f.canned = &agent.RunCodeResult{Success: true, Stdout: `{"ok": true}`}
	v, _ = r.Call(context.Background(), Call{Name: "run_code", Identity: testID, Args: json.RawMessage(`{"language":"python","code":"x"}`)}, nil)
	if res := v.(*RunCodeResult); res.Truncated || res.OutputType != OutputJSON || res.Results == nil {
		t.Errorf("small result: %+v", res)
	}
	small := New(f, Config{MaxOutput: 5})
	v, _ = small.Call(context.Background(), Call{Name: "run_code", Identity: testID, Args: json.RawMessage(`{"language":"python","code":"x"}`)}, nil)
	if res := v.(*RunCodeResult); !res.Truncated || !strings.HasPrefix(res.Stdout, `{"ok"`) {
		t.Errorf("MaxOutput 5: %+v", res)
	}

	// A DataFrame as the last expression is a table.
	f.canned = &agent.RunCodeResult{Success: true, Results: []agent.RichResult{{Main: true, Text: "x", HTML: "<table><tr><td>1</td></tr></table>"}}}
	v, _ = r.Call(context.Background(), Call{Name: "run_code", Identity: testID, Args: json.RawMessage(`{"language":"python","code":"df"}`)}, nil)
	if res := v.(*RunCodeResult); res.OutputType != OutputTable {
		t.Errorf("html table: outputType %s", res.OutputType)
	}
}

func TestAnalysisTruncatedOutputNotParsed(t *testing.T) {
	f := newFake(t)
	f.canned = &agent.RunCodeResult{Success: true, Stdout: `{"a":"` + strings.Repeat("x", 60000) + `"}`}
	res := analyze(t, f, `{"analysisType":"custom","parameters":{},"code":"x"}`)
	if !res.Truncated || res.ParsedOutput != nil || !strings.Contains(res.ParseError, "truncated") {
		t.Errorf("truncated analysis: truncated=%v parseError=%q", res.Truncated, res.ParseError)
	}
}

func TestForcedIsReported(t *testing.T) {
	f := newFake(t)
	f.canned = &agent.RunCodeResult{Success: true}
	var events []CallEvent
	r := New(f, Config{OnCall: func(_ context.Context, ev CallEvent) { events = append(events, ev) }})
	for _, forced := range []bool{true, false} {
		r.Call(context.Background(), Call{Name: "run_code", Identity: testID, Forced: forced, Args: json.RawMessage(`{"language":"python","code":"1"}`)}, nil)
	}
	r.Call(context.Background(), Call{Name: "nope", Identity: testID, Forced: true}, nil)
	if len(events) != 3 || !events[0].Forced || events[1].Forced || events[0].Tool != "run_code" || events[0].Identity != testID {
		t.Fatalf("events = %+v", events)
	}
	if events[2].Err == nil || events[0].Err != nil {
		t.Errorf("errors in events: %+v", events)
	}
}

func TestTrimKernelFrames(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Error: boom\n    at f (cell.js:2:9)\n    at cell.js:5:1\n    at Socket.emit (node:events:524:28)\n    at Socket.emit (node:domain:489:12)",
			"Error: boom\n    at f (cell.js:2:9)\n    at cell.js:5:1"},
		{"Error: ENOENT\n    at Object.openSync (node:fs:573:18)\n    at cell.js:1:28\n    at Socket.emit (node:events:524:28)",
			"Error: ENOENT\n    at Object.openSync (node:fs:573:18)\n    at cell.js:1:28"},
		{"Traceback (most recent call last):\n  File \"<cell-1>\", line 1, in <module>\nZeroDivisionError: division by zero\n",
			"Traceback (most recent call last):\n  File \"<cell-1>\", line 1, in <module>\nZeroDivisionError: division by zero\n"},
		{"SyntaxError: Unexpected token", "SyntaxError: Unexpected token"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := trimKernelFrames(tt.in); got != tt.want {
			t.Errorf("trimKernelFrames(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	r := New(nil, Config{})
	res := r.codeResult(&contexts.ExecuteResult{RunCodeResult: agent.RunCodeResult{Error: &agent.ExecError{Name: "Error", Value: "boom",
		Traceback: "Error: boom\n    at cell.js:1:7\n    at Socket.emit (node:events:524:28)"}}})
	if res.Error.Traceback != "Error: boom\n    at cell.js:1:7" {
		t.Errorf("run_code traceback %q", res.Error.Traceback)
	}
}
