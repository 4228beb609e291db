package interp_test

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExecuteNDJSON(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	run := func(body string) []map[string]any {
		resp := e.Do("POST", "/execute", strings.NewReader(body), e.Headers(sb, "49999")...)
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("execute %d %s", resp.StatusCode, b)
		}
		var out []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "" {
				t.Fatal("blank line in NDJSON")
			}
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			out = append(out, m)
		}
		return out
	}
	types := func(lines []map[string]any) []string {
		var ts []string
		for _, l := range lines {
			ts = append(ts, l["type"].(string))
		}
		return ts
	}
	lines := run(`{"code":"1+1","language":"python"}`)
	if diff := cmp.Diff([]string{"stdout", "result", "number_of_executions", "end_of_execution"}, types(lines)); diff != "" {
		t.Fatalf("line types (-want +got):\n%s", diff)
	}
	if lines[1]["is_main_result"] != true || lines[1]["text"] != "1+1@" {
		t.Fatalf("result line %v", lines[1])
	}
	// kernel chunks are joined into lines; a trailing partial line still comes out
	lines = run(`{"code":"chunks:a|b\n|c|d"}`)
	var stdout []any
	for _, l := range lines {
		if l["type"] == "stdout" {
			stdout = append(stdout, l["text"])
		}
	}
	if diff := cmp.Diff([]any{"ab\n", "cd"}, stdout); diff != "" {
		t.Fatalf("coalesced stdout (-want +got):\n%s", diff)
	}
	lines = run(`{"code":"raise x"}`)
	if diff := cmp.Diff([]string{"stdout", "error", "number_of_executions", "end_of_execution"}, types(lines)); diff != "" {
		t.Fatalf("error types (-want +got):\n%s", diff)
	}
	if lines[1]["name"] != "ValueError" || lines[1]["value"] != "boom" || lines[1]["traceback"] == "" {
		t.Fatalf("error line %v", lines[1])
	}
	// code contexts: create (with the traffic token only, as the SDK sends
	// it), use, list, restart, delete
	traffic := []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999", "E2B-Traffic-Access-Token", sb.TrafficAccessToken}
	resp := e.Do("POST", "/contexts", strings.NewReader(`{"language":"javascript","cwd":"/tmp"}`), traffic...)
	cc := decode[map[string]string](t, resp)
	if resp.StatusCode != 200 || cc["id"] == "" || cc["language"] != "javascript" || cc["cwd"] != "/tmp" {
		t.Fatalf("create context %d %v", resp.StatusCode, cc)
	}
	lines = run(`{"code":"x","context_id":"` + cc["id"] + `"}`)
	if lines[1]["text"] != "x@"+cc["id"] {
		t.Fatalf("context run %v", lines)
	}
	resp = e.Do("GET", "/contexts", nil, traffic...)
	// the default python and javascript contexts first, as E2B lists them,
	// then the created one
	if l := decode[[]map[string]string](t, resp); len(l) != 3 || l[0]["language"] != "python" || l[1]["language"] != "javascript" ||
		l[0]["cwd"] != "/home/user" || l[2]["id"] != cc["id"] {
		t.Fatalf("list contexts %v", l)
	} else if lines = run(`{"code":"x","context_id":"` + l[0]["id"] + `"}`); lines[1]["text"] != "x@" {
		t.Fatalf("a default context runs in the default kernel: %v", lines)
	}
	if resp := e.Do("POST", "/contexts/"+cc["id"]+"/restart", nil, traffic...); resp.StatusCode != 204 {
		t.Fatalf("restart %d", resp.StatusCode)
	}
	if resp := e.Do("DELETE", "/contexts/"+cc["id"], nil, traffic...); resp.StatusCode != 204 {
		t.Fatalf("delete %d", resp.StatusCode)
	}
	if resp := e.Do("POST", "/execute", strings.NewReader(`{"code":"x","context_id":"`+cc["id"]+`"}`), e.Headers(sb, "49999")...); resp.StatusCode != 404 {
		t.Fatalf("execute in deleted context: %d", resp.StatusCode)
	}
	// a language without a kernel: E2B's execution error shape, which the
	// SDK returns in Execution.error
	lines = run(`{"code":"x","language":"r"}`)
	if diff := cmp.Diff([]string{"error", "end_of_execution"}, types(lines)); diff != "" || lines[0]["name"] != "NotSupportedError" ||
		!strings.Contains(lines[0]["value"].(string), `language "r" is not supported`) {
		t.Fatalf("unsupported language (-want +got):\n%s%v", diff, lines)
	}
	// /execute without any credential
	if resp := e.Do("POST", "/execute", strings.NewReader(`{"code":"x"}`), "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49999"); resp.StatusCode != 401 {
		t.Fatalf("execute without token: %d", resp.StatusCode)
	}
}
