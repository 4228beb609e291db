package tools

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// requirePython skips without python3 unless CI=true, where it fails.
func requirePython(t *testing.T, modules ...string) {
	t.Helper()
	_, err := os.Stat("/usr/bin/python3")
	testenv.Require(t, err == nil, "/usr/bin/python3")
	for _, m := range modules {
		err := exec.Command("/usr/bin/python3", "-c", "import "+m).Run()
		testenv.Require(t, err == nil, "python3 module "+m)
	}
}

var testID = contexts.Identity{TenantID: "t1", ConversationID: "c1", PathID: "main"}

func analyze(t *testing.T, f *fakeContexts, args string) *AnalysisResult {
	t.Helper()
	r := New(f, Config{})
	v, err := r.Call(context.Background(), Call{Name: "run_analysis", Identity: testID, Args: json.RawMessage(args)}, nil)
	if err != nil {
		t.Fatalf("run_analysis %s: %v", args, err)
	}
	return v.(*AnalysisResult)
}

// decode turns parsedOutput (json.Number values) into plain JSON values.
func decode(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

func TestTaxCalculation(t *testing.T) {
	requirePython(t)
	// 50,000 income, 5,000 deductions: 10,000 at 10% + 30,000 at 20% +
	// 5,000 at 40% = 1,000 + 6,000 + 2,000 = 9,000.
	res := analyze(t, newFake(t), `{"analysisType":"tax_calculation","parameters":{
		"income":50000,"deductions":[2000,{"amount":3000}],
		"brackets":[{"upTo":10000,"rate":0.1},{"upTo":40000,"rate":20},{"upTo":null,"rate":0.4}]}}`)
	if !res.Success || res.ParseError != "" || !res.Builtin {
		t.Fatalf("result: %+v", res)
	}
	got := decode(t, res.ParsedOutput)
	want := map[string]any{
		"income": 50000.0, "deductions": 5000.0, "taxableIncome": 45000.0, "totalTax": 9000.0,
		"effectiveRate": 0.18, "marginalRate": 0.4, "netIncome": 41000.0,
		"perBracket": []any{
			map[string]any{"from": 0.0, "upTo": 10000.0, "rate": 0.1, "taxableAmount": 10000.0, "tax": 1000.0},
			map[string]any{"from": 10000.0, "upTo": 40000.0, "rate": 0.2, "taxableAmount": 30000.0, "tax": 6000.0},
			map[string]any{"from": 40000.0, "upTo": nil, "rate": 0.4, "taxableAmount": 5000.0, "tax": 2000.0},
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("tax (-want +got):\n%s", diff)
	}
	if res.OutputType != OutputJSON {
		t.Errorf("outputType = %s, want json", res.OutputType)
	}

	// Income inside the first bracket; CSV output parses to rows.
	res = analyze(t, newFake(t), `{"analysisType":"tax_calculation","outputFormat":"csv","parameters":{
		"income":8000,"brackets":[{"upTo":10000,"rate":0.1},{"upTo":null,"rate":0.5}]}}`)
	rows, ok := res.ParsedOutput.([]map[string]string)
	if !res.Success || !ok || len(rows) != 2 {
		t.Fatalf("csv result: %+v", res)
	}
	if rows[0]["tax"] != "800.0" || rows[1]["tax"] != "0.0" || rows[1]["upTo"] != "" {
		t.Errorf("csv rows = %v", rows)
	}
	if res.OutputType != OutputTable {
		t.Errorf("outputType = %s, want table", res.OutputType)
	}

	// Bad parameters are a failed run with a clear python error, not a Go error.
	res = analyze(t, newFake(t), `{"analysisType":"tax_calculation","parameters":{"income":"lots","brackets":[]}}`)
	if res.Success || res.Error == nil || !strings.Contains(res.Error.Value, "parameters.income must be a number") {
		t.Errorf("bad income: %+v", res)
	}
	res = analyze(t, newFake(t), `{"analysisType":"tax_calculation","parameters":{"income":100,"brackets":[{"upTo":50,"rate":0.1}]}}`)
	if res.Success || res.Error == nil || !strings.Contains(res.Error.Value, "not covered") {
		t.Errorf("uncovered income: %+v", res)
	}
}

func TestComplianceCheck(t *testing.T) {
	requirePython(t)
	res := analyze(t, newFake(t), `{"analysisType":"compliance_check","parameters":{
		"record":{"name":"Ann","age":17,"country":"IE","email":"ann@exemplar.ie","kyc":{"verified":true},"opened":"2024-03-01"},
		"rules":[
			{"id":"adult","field":"age","op":"gte","value":18},
			{"id":"eu","field":"country","op":"in","value":["IE","FR"]},
			{"id":"not-us","field":"country","op":"not_in","value":["US"]},
			{"id":"email","field":"email","op":"regex","value":"^[^@]+@[^@]+$"},
			{"id":"kyc","field":"kyc.verified","op":"eq","value":true},
			{"id":"phone","field":"phone","op":"required"},
			{"id":"name","field":"name","op":"ne","value":""},
			{"id":"recent","field":"opened","op":"gt","value":"2024-01-01"},
			{"id":"young","field":"age","op":"lt","value":"18"},
			{"id":"max","field":"age","op":"lte","value":99}
		]}}`)
	if !res.Success || res.ParseError != "" {
		t.Fatalf("result: %+v", res)
	}
	got := decode(t, res.ParsedOutput)
	passed := map[string]bool{}
	for _, r := range got["results"].([]any) {
		m := r.(map[string]any)
		passed[m["id"].(string)] = m["passed"].(bool)
	}
	want := map[string]bool{"adult": false, "eu": true, "not-us": true, "email": true, "kyc": true,
		"phone": false, "name": true, "recent": true, "young": false, "max": true}
	if diff := cmp.Diff(want, passed); diff != "" {
		t.Errorf("pass/fail (-want +got):\n%s", diff)
	}
	wantSummary := map[string]any{"total": 10.0, "passed": 7.0, "failed": 3.0, "compliant": false, "passRate": 0.7}
	if diff := cmp.Diff(wantSummary, got["summary"]); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if got["compliant"] != false {
		t.Errorf("compliant = %v", got["compliant"])
	}

	res = analyze(t, newFake(t), `{"analysisType":"compliance_check","parameters":{"record":{},"rules":[{"field":"a","op":"like"}]}}`)
	if res.Success || res.Error == nil || !strings.Contains(res.Error.Value, "op must be one of") {
		t.Errorf("bad op: %+v", res)
	}
}

const salesCSV = "region,units,price,note\n" +
	"north,10,2.5,a\n" +
	"south,4,,b\n" +
	"east,7,3.25,c\n" +
	"west,1,10,\n" +
	"north,13,4,d\n"

func TestDataAnalysis(t *testing.T) {
	requirePython(t, "pandas")
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "sales.csv")
	if err := os.WriteFile(csvPath, []byte(salesCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := `[{"region":"north","units":10,"price":2.5},{"region":"south","units":4,"price":null},
		{"region":"east","units":7,"price":3.25},{"region":"west","units":1,"price":10},{"region":"north","units":13,"price":4,"flag":true}]`
	// units: 1 4 7 10 13 -> mean 7, sample std sqrt(22.5), quartiles 4 7 10.
	// price: 2.5 3.25 4 10 -> mean 4.9375, quartiles 3.0625 3.625 5.5.
	want := map[string]any{
		"units": map[string]any{"count": 5.0, "mean": 7.0, "std": math.Sqrt(22.5), "min": 1.0, "25%": 4.0, "50%": 7.0, "75%": 10.0, "max": 13.0},
		"price": map[string]any{"count": 4.0, "mean": 4.9375, "std": math.Sqrt(35.296875 / 3), "min": 2.5, "25%": 3.0625, "50%": 3.625, "75%": 5.5, "max": 10.0},
	}
	hidePandas := "import sys\nsys.modules['pandas'] = None\n"
	cases := []struct {
		name, params, prelude, engine string
	}{
		{"rows/pandas", `{"rows":` + rows + `}`, "", "pandas"},
		{"rows/python", `{"rows":` + rows + `,"engine":"python"}`, "", "python"},
		{"rows/no-pandas-installed", `{"rows":` + rows + `}`, hidePandas, "python"},
		{"csv/pandas", `{"path":"` + csvPath + `"}`, "", "pandas"},
		{"csv/python", `{"path":"` + csvPath + `"}`, hidePandas, "python"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.prelude = tc.prelude
			res := analyze(t, f, `{"analysisType":"data_analysis","parameters":`+tc.params+`}`)
			if !res.Success || res.ParseError != "" {
				t.Fatalf("result: %+v", res)
			}
			got := decode(t, res.ParsedOutput)
			if got["engine"] != tc.engine {
				t.Errorf("engine = %v, want %s", got["engine"], tc.engine)
			}
			if got["rowCount"] != 5.0 {
				t.Errorf("rowCount = %v", got["rowCount"])
			}
			if diff := cmp.Diff([]any{"units", "price"}, got["numericColumns"]); diff != "" {
				t.Errorf("numericColumns (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, got["stats"], cmpopts.EquateApprox(1e-6, 0)); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}

	// CSV output of the statistics parses into rows keyed by the header.
	res := analyze(t, newFake(t), `{"analysisType":"data_analysis","outputFormat":"csv","parameters":{"path":"`+csvPath+`","columns":["units"]}}`)
	csvRows, ok := res.ParsedOutput.([]map[string]string)
	if !ok || len(csvRows) != 1 || csvRows[0]["column"] != "units" || csvRows[0]["mean"] != "7.0" {
		t.Fatalf("csv stats: %+v", res)
	}
	// Text output is a column-aligned table.
	res = analyze(t, newFake(t), `{"analysisType":"data_analysis","outputFormat":"text","parameters":{"rows":`+rows+`}}`)
	if s, _ := res.ParsedOutput.(string); !strings.Contains(s, "units") || res.OutputType != OutputTable {
		t.Errorf("text stats: outputType %s, %q", res.OutputType, res.ParsedOutput)
	}
}

func TestAnalysisCustomAndParams(t *testing.T) {
	requirePython(t)
	f := newFake(t)
	// params reach the code; quotes and newlines in values survive.
	res := analyze(t, f, `{"analysisType":"custom","parameters":{"a":2,"s":"it's \"x\"\n"},
		"code":"import json\nprint(json.dumps({'double': params['a']*2, 's': params['s'], 'fmt': output_format}))"}`)
	got := decode(t, res.ParsedOutput)
	if diff := cmp.Diff(map[string]any{"double": 4.0, "s": "it's \"x\"\n", "fmt": "json"}, got); diff != "" {
		t.Errorf("custom (-want +got):\n%s", diff)
	}
	if res.Builtin {
		t.Error("custom code reported as builtin")
	}

	// A parse failure is reported in the result, not thrown.
	res = analyze(t, f, `{"analysisType":"custom","parameters":{},"code":"print('not json {')"}`)
	if !res.Success || res.ParsedOutput != nil || !strings.Contains(res.ParseError, "output is not valid JSON") {
		t.Errorf("json parse failure: %+v", res)
	}
	res = analyze(t, f, `{"analysisType":"custom","outputFormat":"csv","parameters":{},"code":"print('a,b\\n1,2,3')"}`)
	if !res.Success || res.ParsedOutput != nil || !strings.Contains(res.ParseError, "output is not valid CSV") {
		t.Errorf("csv parse failure: %+v", res)
	}

	// custom without code is invalid; so is a built-in in javascript.
	r := New(f, Config{})
	for _, args := range []string{
		`{"analysisType":"custom","parameters":{}}`,
		`{"analysisType":"tax_calculation","parameters":{},"language":"javascript"}`,
	} {
		_, err := r.Call(context.Background(), Call{Name: "run_analysis", Identity: testID, Args: json.RawMessage(args)}, nil)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want invalid_argument", args, err)
		}
	}
}

// TestAnalysisLeavesNoHelpers checks that a built-in program removes its
// helpers, so a persistent kernel's namespace is not polluted.
func TestAnalysisLeavesNoHelpers(t *testing.T) {
	requirePython(t)
	code, err := AnalysisProgram("compliance_check", json.RawMessage(`{"record":{"a":1},"rules":[{"field":"a","op":"eq","value":1}]}`), "json")
	if err != nil {
		t.Fatal(err)
	}
	code += "\nleft = sorted(n for n in dir() if n.startswith('_sandlot'))\nassert not left, left\nprint('clean')\n"
	r := runPython(context.Background(), code)
	if !r.Success || !strings.Contains(r.Stdout, "clean") {
		t.Fatalf("helpers left behind: %+v %+v", r, r.Error)
	}
}
