package tools_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
	"github.com/sandlot/sandlot/tools/toolstest"
)

// TestLocalSandbox runs the analysis and file tools in a real sandbox (the
// local provider on the OCI runtime): pandas from the sandbox image, the
// parameters file on the sandbox's /tmp, the home at /home/user.
func TestLocalSandbox(t *testing.T) {
	testenv.RequireOCIRuntime(t)
	agentBin := testenv.AgentBinary(t)

	ctx := context.Background()
	stateDir := filepath.Join(t.TempDir(), "run")
	p, err := local.New(local.Config{StateDir: stateDir, AgentPath: agentBin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := p.List(context.Background())
		for _, id := range ids {
			p.Destroy(context.Background(), id)
		}
	})
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := contexts.NewManager(memory.New(), p, contexts.Config{Guard: g, PoolSize: -1})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	r := tools.New(m, tools.Config{})
	id := contexts.Identity{TenantID: "t", ConversationID: "local", PathID: "main"}
	do := func(tool, args string) any {
		t.Helper()
		v, err := r.Call(ctx, tools.Call{Name: tool, Identity: id, Args: json.RawMessage(args)}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return v
	}

	var rows strings.Builder
	rows.WriteString(`[`)
	for i := 0; i < 3000; i++ {
		if i > 0 {
			rows.WriteString(",")
		}
		rows.WriteString(`{"n":` + strconv.Itoa(i%10) + `,"note":"some padding text for row ` + strconv.Itoa(i) + `"}`)
	}
	rows.WriteString(`]`)
	ar := do("run_analysis", `{"analysisType":"data_analysis","parameters":{"rows":`+rows.String()+`}}`).(*tools.AnalysisResult)
	if !ar.Success || ar.ParseError != "" {
		t.Fatalf("data_analysis: %+v %+v", ar, ar.Error)
	}
	out := ar.ParsedOutput.(map[string]any)
	if out["engine"] != "pandas" || out["rowCount"].(json.Number).String() != "3000" {
		t.Errorf("data_analysis: engine %v rows %v", out["engine"], out["rowCount"])
	}
	if mean := out["stats"].(map[string]any)["n"].(map[string]any)["mean"].(json.Number).String(); mean != "4.5" {
		t.Errorf("mean of n = %s", mean)
	}

	ar = do("run_analysis", `{"analysisType":"compliance_check","outputFormat":"csv","parameters":{"record":{"age":30},"rules":[{"id":"adult","field":"age","op":"gte","value":18}]}}`).(*tools.AnalysisResult)
	if rows, ok := ar.ParsedOutput.([]map[string]string); !ok || len(rows) != 1 || rows[0]["passed"] != "pass" {
		t.Errorf("compliance csv: %+v", ar)
	}

	// result is the program's last expression: its JSON when the kernel
	// gives one (a _repr_json_), else its text (000 §6.1).
	ar = do("run_analysis", `{"analysisType":"custom","parameters":{},"code":"x = 40\nx + 2"}`).(*tools.AnalysisResult)
	if ar.Result != "42" {
		t.Errorf("result of x + 2: %#v, want \"42\"", ar.Result)
	}
	ar = do("run_analysis", `{"analysisType":"custom","parameters":{},"code":"class J:\n    def _repr_json_(self):\n        return {'answer': 42}\nJ()"}`).(*tools.AnalysisResult)
	if diff := cmp.Diff(map[string]any{"answer": 42.0}, ar.Result); diff != "" {
		t.Errorf("result of a JSON value (-want +got):\n%s", diff)
	}

	key := toolstest.FakeOpenAIKey()
	do("write_file", `{"path":"notes/secret.txt","content":"token: `+key+`\n"}`)
	rf := do("read_file", `{"path":"/home/user/notes/secret.txt"}`).(*tools.ReadFileResult)
	if strings.Contains(rf.Content, key) || !strings.Contains(rf.Content, "[REDACTED:") {
		t.Errorf("read_file: %q", rf.Content)
	}
	br := do("bash", `{"command":"pwd; id -un","cwd":"notes"}`).(*tools.BashResult)
	if !br.Success || !strings.HasPrefix(br.Stdout, "/home/user/notes\n") {
		t.Errorf("bash: %+v", br)
	}
}
