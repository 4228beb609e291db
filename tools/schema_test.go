package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

// argCases are good (want "") and bad arguments for every tool. They are
// shared with the cross-check against an independent validator.
var argCases = []struct {
	tool, args, want string
}{
	{"run_code", `{"language":"python","code":"1+1"}`, ""},
	{"run_code", `{"language":"sh","code":"ls","description":"list","timeout":1000}`, ""},
	{"run_code", `{"language":"typescript","code":"1","timeout":600000}`, ""},
	{"run_code", `{"language":"ruby","code":"1"}`, "run_code: language must be one of python, javascript, typescript, bash, sh"},
	{"run_code", `{"code":"1"}`, "run_code: language is required"},
	{"run_code", `{"language":"python"}`, "run_code: code is required"},
	{"run_code", `{"language":"python","code":""}`, "run_code: code must not be empty"},
	{"run_code", `{"language":"python","code":1}`, "run_code: code must be a string"},
	{"run_code", `{"language":"python","code":"1","timeout":999}`, "run_code: timeout must be >= 1000"},
	{"run_code", `{"language":"python","code":"1","timeout":600001}`, "run_code: timeout must be <= 600000"},
	{"run_code", `{"language":"python","code":"1","timeout":1500.5}`, "run_code: timeout must be an integer"},
	{"run_code", `{"language":"python","code":"1","timeout":"5000"}`, "run_code: timeout must be an integer"},
	{"run_code", `{"language":"python","code":"1","lang":"x"}`, `run_code: unknown field "lang"`},
	{"run_code", `[1,2]`, "run_code: arguments must be an object"},
	{"run_code", `{"language":`, "run_code: arguments are not valid JSON"},

	{"run_analysis", `{"analysisType":"tax_calculation","parameters":{"income":1}}`, ""},
	{"run_analysis", `{"analysisType":"custom","parameters":{},"code":"print(1)","outputFormat":"text","language":"javascript"}`, ""},
	{"run_analysis", `{"analysisType":"tax","parameters":{}}`, "run_analysis: analysisType must be one of tax_calculation, compliance_check, data_analysis, custom"},
	{"run_analysis", `{"analysisType":"custom"}`, "run_analysis: parameters is required"},
	{"run_analysis", `{"analysisType":"custom","parameters":[]}`, "run_analysis: parameters must be an object"},
	{"run_analysis", `{"analysisType":"custom","parameters":{},"outputFormat":"xml"}`, "run_analysis: outputFormat must be one of json, text, csv"},
	{"run_analysis", `{"analysisType":"custom","parameters":{},"language":"bash"}`, "run_analysis: language must be one of python, javascript"},

	{"bash", `{"command":"ls -la"}`, ""},
	{"bash", `{"command":"pwd","cwd":"/tmp","timeout":2000}`, ""},
	{"bash", `{}`, "bash: command is required"},
	{"bash", `{"command":"ls","cwd":""}`, "bash: cwd must not be empty"},
	{"bash", `{"command":"ls","timeout":0}`, "bash: timeout must be >= 1000"},
	{"bash", `{"command":"ls","shell":"zsh"}`, `bash: unknown field "shell"`},

	{"read_file", `{"path":"a.txt"}`, ""},
	{"read_file", `{"path":"a.txt","offset":10,"limit":5}`, ""},
	{"read_file", `{"path":"a.txt","offset":0}`, "read_file: offset must be >= 1"},
	{"read_file", `{"path":"a.txt","limit":100001}`, "read_file: limit must be <= 100000"},
	{"read_file", `{"offset":1}`, "read_file: path is required"},
	{"read_file", `{"path":true}`, "read_file: path must be a string"},

	{"write_file", `{"path":"a.txt","content":""}`, ""},
	{"write_file", `{"path":"a.txt"}`, "write_file: content is required"},
	{"write_file", `{"path":"a.txt","content":null}`, "write_file: content must be a string"},

	{"edit_file", `{"path":"a","old_string":"x","new_string":"y","replace_all":true}`, ""},
	{"edit_file", `{"path":"a","old_string":"","new_string":"y"}`, "edit_file: old_string must not be empty"},
	{"edit_file", `{"path":"a","old_string":"x"}`, "edit_file: new_string is required"},
	{"edit_file", `{"path":"a","old_string":"x","new_string":"y","replace_all":"yes"}`, "edit_file: replace_all must be a boolean"},

	{"list_files", `{}`, ""},
	{"list_files", `null`, ""},
	{"list_files", `{"path":"/tmp","depth":3}`, ""},
	{"list_files", `{"depth":11}`, "list_files: depth must be <= 10"},
	{"list_files", `{"depth":0}`, "list_files: depth must be >= 1"},

	{"glob", `{"pattern":"**/*.py","path":"src"}`, ""},
	{"glob", `{"path":"src"}`, "glob: pattern is required"},
	{"glob", `{"pattern":"*","root":"/"}`, `glob: unknown field "root"`},

	{"grep", `{"pattern":"fo+","path":".","glob":"*.go","ignore_case":true}`, ""},
	{"grep", `{"pattern":"x","ignore_case":1}`, "grep: ignore_case must be a boolean"},
	{"grep", `{"glob":"*.go"}`, "grep: pattern is required"},
	{"suspend_sandbox", `{}`, ""},
	{"suspend_sandbox", `{"keep":60}`, "suspend_sandbox: unknown field \"keep\""},
	{"fork_sandbox", `{"to_path":"attempt-2"}`, ""},
	{"fork_sandbox", `{}`, "fork_sandbox: to_path is required"},
	{"fork_sandbox", `{"to_path":"b","conversationId":"other"}`, "fork_sandbox: unknown field \"conversationId\""},
}

func TestValidate(t *testing.T) {
	r := New(newFake(t), Config{})
	for _, tc := range argCases {
		t.Run(tc.tool+"/"+tc.args, func(t *testing.T) {
			err := r.Validate(tc.tool, json.RawMessage(tc.args))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %s", tc.args)
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error %v is not invalid_argument", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error = %q, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestEveryToolHasCases(t *testing.T) {
	r := New(newFake(t), Config{})
	good, bad := map[string]int{}, map[string]int{}
	for _, tc := range argCases {
		if tc.want == "" {
			good[tc.tool]++
		} else {
			bad[tc.tool]++
		}
	}
	for _, tool := range r.Tools() {
		if good[tool.Name] == 0 || bad[tool.Name] == 0 {
			t.Errorf("tool %s: %d good and %d bad argument cases; want both", tool.Name, good[tool.Name], bad[tool.Name])
		}
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
}

// TestSchemaKeywords makes sure no schema uses a keyword the validator
// would silently ignore.
func TestSchemaKeywords(t *testing.T) {
	r := New(newFake(t), Config{})
	var walk func(tool, path string, v any)
	walk = func(tool, path string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s %s: schema is not an object", tool, path)
			return
		}
		for k, sub := range m {
			if !knownKeywords[k] {
				t.Errorf("%s %s: keyword %q is not enforced by the validator", tool, path, k)
			}
			switch k {
			case "properties":
				for name, ps := range sub.(map[string]any) {
					walk(tool, path+"."+name, ps)
				}
			case "items":
				walk(tool, path+"[]", sub)
			}
		}
	}
	for _, tool := range r.Tools() {
		var v any
		if err := json.Unmarshal(tool.InputSchema, &v); err != nil {
			t.Fatal(err)
		}
		walk(tool.Name, "", v)
		if v.(map[string]any)["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema is not draft 2020-12", tool.Name)
		}
	}
}

func TestUnknownTool(t *testing.T) {
	r := New(newFake(t), Config{})
	_, err := r.Call(context.Background(), Call{Name: "rm_rf", Args: json.RawMessage(`{}`)}, nil)
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Call(rm_rf) = %v, want not_found", err)
	}
}
