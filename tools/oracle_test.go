package tools

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestSchemasAgreeWithOracle checks the hand-written validator against an
// independent draft 2020-12 implementation (the one the MCP SDK uses): both
// accept every good case and reject every bad one, and every schema
// resolves as valid 2020-12.
func TestSchemasAgreeWithOracle(t *testing.T) {
	r := New(newFake(t), Config{})
	resolved := map[string]*jsonschema.Resolved{}
	for _, tool := range r.Tools() {
		var s jsonschema.Schema
		if err := json.Unmarshal(tool.InputSchema, &s); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: schema does not resolve: %v", tool.Name, err)
		}
		resolved[tool.Name] = rs
	}
	for _, tc := range argCases {
		var inst any
		if err := json.Unmarshal([]byte(tc.args), &inst); err != nil {
			continue // not JSON: only our validator sees it
		}
		if inst == nil {
			inst = map[string]any{} // we read null arguments as {}, as MCP does
		}
		oracleErr := resolved[tc.tool].Validate(inst)
		ours := r.Validate(tc.tool, json.RawMessage(tc.args))
		if (oracleErr == nil) != (ours == nil) {
			t.Errorf("%s %s: oracle says %v, we say %v", tc.tool, tc.args, oracleErr, ours)
		}
	}
}
