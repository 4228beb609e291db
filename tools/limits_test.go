package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestCodeLimitAdvertised checks that the schemas of the code tools tell
// a model the code size limit the manager enforces, for the default and
// for a configured limit, and that the schema itself rejects code past it.
func TestCodeLimitAdvertised(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     int
		manager int // the limit the manager enforces
	}{
		{"default", 0, contexts.DefaultMaxCodeBytes},
		{"configured", 64 * 1024, 64 * 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(newFake(t), Config{MaxCodeBytes: tc.cfg})
			for tool, reserve := range map[string]int{"run_code": 0, "run_analysis": analysisPreludeReserve} {
				want := tc.manager - reserve
				var s struct {
					Properties map[string]struct {
						MaxLength   int    `json:"maxLength"`
						Description string `json:"description"`
					} `json:"properties"`
				}
				if err := json.Unmarshal(r.entries[tool].tool.InputSchema, &s); err != nil {
					t.Fatal(err)
				}
				code := s.Properties["code"]
				if code.MaxLength != want {
					t.Errorf("%s: code maxLength = %d, want %d (the manager's limit)", tool, code.MaxLength, want)
				}
				if !strings.Contains(code.Description, codeLimitText(want)) {
					t.Errorf("%s: code description %q does not state the limit", tool, code.Description)
				}
				// The schema enforces it: code at the limit passes, one
				// byte more is refused.
				args := func(n int) json.RawMessage {
					a := map[string]any{"language": "python", "code": strings.Repeat("x", n)}
					if tool == "run_analysis" {
						a["analysisType"], a["parameters"] = "custom", map[string]any{}
					}
					b, _ := json.Marshal(a)
					return b
				}
				if err := r.Validate(tool, args(want)); err != nil {
					t.Errorf("%s: code of %d bytes (the limit): %v", tool, want, err)
				}
				if err := r.Validate(tool, args(want+1)); err == nil {
					t.Errorf("%s: code of %d bytes passed validation, limit %d", tool, want+1, want)
				}
			}
		})
	}
}

// TestAnalysisPreludeReserve checks that the largest inline parameters
// prelude fits the reserve the run_analysis schema keeps for it.
func TestAnalysisPreludeReserve(t *testing.T) {
	params := []byte(`"` + strings.Repeat("\u00e9", inlineParamsMax/2-2) + `"`)
	for _, lang := range []string{"python", "javascript", "typescript", "bash"} {
		if n := len(paramsPrelude(lang, params, "json")); n > analysisPreludeReserve {
			t.Errorf("%s prelude is %d bytes, reserve %d", lang, n, analysisPreludeReserve)
		}
	}
}

// TestRotatedReachesTheResult: a run that used up its context's executions
// tells the caller in the tool result (rotated: true) and in its JSON.
func TestRotatedReachesTheResult(t *testing.T) {
	r := New(newFake(t), Config{})
	for _, rotated := range []bool{false, true} {
		out := r.codeResult(&contexts.ExecuteResult{Rotated: rotated})
		b, _ := json.Marshal(out)
		if out.Rotated != rotated || strings.Contains(string(b), `"rotated":true`) != rotated {
			t.Errorf("rotated %v: result %s", rotated, b)
		}
	}
}

// TestNoToolsWithoutSandbox: a daemon with no usable provider offers no
// tool (each needs a sandbox), and a call by name fails with the reason.
func TestNoToolsWithoutSandbox(t *testing.T) {
	why := fmt.Errorf("no usable sandbox provider: %w", errdefs.ErrUnavailable)
	r := New(newFake(t), Config{Unavailable: why})
	if tl := r.Tools(); len(tl) != 0 {
		t.Fatalf("tools offered without a sandbox: %d", len(tl))
	}
	_, err := r.Call(context.Background(), Call{Name: "run_code", Args: json.RawMessage(`{"language":"python","code":"1"}`)}, nil)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "no usable sandbox provider") {
		t.Fatalf("call: %v", err)
	}
	if n := len(New(newFake(t), Config{}).Tools()); n == 0 {
		t.Fatal("no tools offered with a sandbox")
	}
}
