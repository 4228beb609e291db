package tools_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
	"github.com/sandlot/sandlot/tools/toolstest"
)

// TestRealAgent runs every tool through the real manager and guard against
// real sandlot-agent processes (host processes, no container): real python
// and node kernels, real files, real exec.
func TestRealAgent(t *testing.T) {
	toolstest.RequirePython(t)
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	prov := toolstest.NewHostProvider(t)
	m := contexts.NewManager(memory.New(), prov, contexts.Config{Guard: g, PoolSize: -1})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	r := tools.New(m, tools.Config{})
	id := contexts.Identity{TenantID: "t", ConversationID: "c", PathID: "main"}
	do := func(tool, args string) any {
		t.Helper()
		v, err := r.Call(ctx, tools.Call{Name: tool, Identity: id, Args: json.RawMessage(args)}, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", tool, args, err)
		}
		return v
	}
	code := func(lang, src string) *tools.RunCodeResult {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"language": lang, "code": src})
		return do("run_code", string(b)).(*tools.RunCodeResult)
	}

	// Persistent python state; the last expression is a result.
	code("python", "x = 20")
	if res := code("python", "x * 2 + 2"); !res.Success || len(res.Results) == 0 || res.Results[0].Text != "42" {
		t.Fatalf("python state: %+v", res)
	}

	// Built-in analyses run in the user's kernel and leave no helpers.
	ar := do("run_analysis", `{"analysisType":"tax_calculation","parameters":{"income":30000,"brackets":[{"upTo":20000,"rate":0.2},{"upTo":null,"rate":0.4}]}}`).(*tools.AnalysisResult)
	if !ar.Success || ar.ParseError != "" {
		t.Fatalf("tax: %+v %+v", ar, ar.Error)
	}
	if tax, _ := ar.ParsedOutput.(map[string]any)["totalTax"].(json.Number); tax.String() != "8000.0" {
		t.Errorf("totalTax = %v, want 8000", ar.ParsedOutput)
	}
	if res := code("python", "print(sorted(n for n in dir() if n.startswith('_sandlot')), x, params['income'])"); res.Stdout != "[] 20 30000\n" {
		t.Errorf("kernel namespace after run_analysis: %q %+v", res.Stdout, res.Error)
	}

	// data_analysis over a CSV written with write_file, by relative path.
	do("write_file", `{"path":"data/sales.csv","content":"units,price\n1,2.5\n4,3\n7,\n"}`)
	ar = do("run_analysis", `{"analysisType":"data_analysis","parameters":{"path":"data/sales.csv"}}`).(*tools.AnalysisResult)
	if !ar.Success || ar.ParseError != "" {
		t.Fatalf("data_analysis: %+v %+v", ar, ar.Error)
	}
	stats := ar.ParsedOutput.(map[string]any)["stats"].(map[string]any)
	if mean := stats["units"].(map[string]any)["mean"].(json.Number).String(); mean != "4.0" {
		t.Errorf("units mean = %s", mean)
	}

	// Large parameters (over the manager's code size limit if inlined)
	// travel as a file that the program removes.
	var rows strings.Builder
	rows.WriteString(`[`)
	for i := 0; i < 5000; i++ {
		if i > 0 {
			rows.WriteString(",")
		}
		rows.WriteString(`{"i":` + strconv.Itoa(i) + `,"label":"row number ` + strconv.Itoa(i) + `"}`)
	}
	rows.WriteString(`]`)
	ar = do("run_analysis", `{"analysisType":"data_analysis","parameters":{"rows":`+rows.String()+`}}`).(*tools.AnalysisResult)
	if !ar.Success || ar.ParsedOutput.(map[string]any)["rowCount"].(json.Number).String() != "5000" {
		t.Fatalf("large params: %+v %+v", ar.ParsedOutput, ar.Error)
	}
	if res := code("python", "import glob; print(len(glob.glob('/tmp/.sandlot-params-*')))"); res.Stdout != "0\n" {
		t.Errorf("params file left behind: %q", res.Stdout)
	}

	// Custom javascript sees params, twice in the same persistent kernel.
	for i := 0; i < 2; i++ {
		ar = do("run_analysis", `{"analysisType":"custom","language":"javascript","parameters":{"n":[1,2,3]},"code":"console.log(JSON.stringify({sum: params.n.reduce((a, b) => a + b, 0), fmt: output_format}))"}`).(*tools.AnalysisResult)
		if !ar.Success || ar.ParseError != "" || ar.ParsedOutput.(map[string]any)["sum"].(json.Number).String() != "6" {
			t.Fatalf("custom javascript run %d: %+v %+v", i, ar, ar.Error)
		}
	}

	// bash (one-shot, cwd honoured) vs run_code bash (persistent).
	br := do("bash", `{"command":"cd /tmp && pwd; echo $FOO","cwd":"data"}`).(*tools.BashResult)
	if !br.Success || br.Stdout != "/tmp\n\n" {
		t.Errorf("bash: %+v", br)
	}
	br = do("bash", `{"command":"pwd"}`).(*tools.BashResult)
	if !strings.HasSuffix(strings.TrimSpace(br.Stdout), "/home") {
		t.Errorf("bash is not one-shot: pwd = %q", br.Stdout)
	}
	code("bash", "export FOO=bar; cd data")
	if res := code("bash", "echo $FOO; basename $(pwd)"); res.Stdout != "bar\ndata\n" {
		t.Errorf("run_code bash is not persistent: %+v", res)
	}
	if br = do("bash", `{"command":"exit 3"}`).(*tools.BashResult); br.Success || br.ExitCode != 3 {
		t.Errorf("bash exit 3: %+v", br)
	}

	// File tools on the real file system, with a secret redacted.
	key := toolstest.FakeOpenAIKey()
	do("write_file", `{"path":"src/app.py","content":"def main():\n    return 1\n\nKEY = \"`+key+`\"\n"}`)
	rf := do("read_file", `{"path":"src/app.py","offset":2,"limit":1}`).(*tools.ReadFileResult)
	if rf.Content != "    return 1\n" || rf.TotalLines != 4 {
		t.Errorf("read_file: %+v", rf)
	}
	rf = do("read_file", `{"path":"src/app.py"}`).(*tools.ReadFileResult)
	if strings.Contains(rf.Content, key) || !strings.Contains(rf.Content, "[REDACTED:") {
		t.Errorf("secret not redacted in read_file: %q", rf.Content)
	}
	if ef := do("edit_file", `{"path":"src/app.py","old_string":"return 1","new_string":"return 2"}`).(*tools.EditFileResult); ef.Replacements != 1 {
		t.Errorf("edit_file: %+v", ef)
	}
	gr := do("grep", `{"pattern":"RETURN \\d","ignore_case":true,"glob":"*.py"}`).(*tools.GrepResult)
	if len(gr.Matches) != 1 || gr.Matches[0].Line != 2 || !strings.Contains(gr.Matches[0].Text, "return 2") {
		t.Errorf("grep: %+v", gr)
	}
	gl := do("glob", `{"pattern":"**/*.py"}`).(*tools.GlobResult)
	if len(gl.Paths) != 1 || !strings.HasSuffix(gl.Paths[0], "src/app.py") {
		t.Errorf("glob: %+v", gl)
	}
	lf := do("list_files", `{"depth":2}`).(*tools.ListFilesResult)
	names := map[string]bool{}
	for _, e := range lf.Entries {
		names[e.Name] = true
	}
	if !names["src"] || !names["app.py"] || !names["sales.csv"] {
		t.Errorf("list_files depth 2: %+v", lf.Entries)
	}
	_, err = r.Call(ctx, tools.Call{Name: "read_file", Identity: id, Args: json.RawMessage(`{"path":"/usr/bin/python3"}`)}, nil)
	if err == nil || !strings.Contains(err.Error(), "binary file") {
		t.Errorf("binary read: %v", err)
	}
}
