package interp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat/interp"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
)

// TestExecuteSilentCell: a cell that prints nothing for a while still gets
// its response headers at once and keepalive lines while it is silent (so
// the SDK's requestTimeoutMs does not trip), it runs without a server-side
// timeout (TimeoutMs -1), and a string result loses its quotes as on E2B.
func TestExecuteSilentCell(t *testing.T) {
	t.Cleanup(interp.SetExecuteTimings(10*time.Millisecond, 20*time.Millisecond))
	e, p := newManagerEnv(t, contexts.Config{})
	release := make(chan struct{})
	p.Run = func(ctx context.Context, sb *contextstest.Sandbox, rp agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		if rp.Code != "silent" {
			return contextstest.Echo(ctx, sb, rp, out)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		r := &agent.RunCodeResult{Success: true, Results: []agent.RichResult{{Main: true, Text: fmt.Sprintf("'timeout %d'", rp.TimeoutMs)}}}
		if out != nil {
			out(agent.OutputEvent{Stream: agent.Result, Result: &r.Results[0]})
		}
		return r, nil
	}
	sb := e.Create(key1, `{}`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.Srv.URL+"/execute", strings.NewReader(`{"code":"silent"}`))
	hdr := e.Headers(sb, "49999")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	// Do returns once the headers are in; the cell is still blocked.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no response headers while the cell is silent: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != `{"type":"keepalive"}` {
		t.Fatalf("first line while silent: %q (%v)", sc.Text(), sc.Err())
	}
	close(release)
	var types []string
	var text string
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if m["type"] == "keepalive" {
			continue
		}
		types = append(types, m["type"].(string))
		if m["type"] == "result" {
			text = m["text"].(string)
		}
	}
	if diff := cmp.Diff([]string{"result", "number_of_executions", "end_of_execution"}, types); diff != "" {
		t.Fatalf("lines (-want +got):\n%s", diff)
	}
	if text != "timeout -1" {
		t.Fatalf("result text %q, want the unquoted string of an unbounded run", text)
	}
}

// TestExecuteBounds: a 150 KB cell runs (more than the manager's own 100 KB
// default); a cell over the E2B bound is 413 with the limit in the message.
func TestExecuteBounds(t *testing.T) {
	e, _ := newManagerEnv(t, contexts.Config{})
	sb := e.Create(key1, `{}`)
	body := func(n int) io.Reader {
		b, _ := json.Marshal(map[string]string{"code": strings.Repeat("a", n)})
		return strings.NewReader(string(b))
	}
	resp := e.Do("POST", "/execute", body(150<<10), e.Headers(sb, "49999")...)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.Contains(string(b), `"type":"error"`) || !strings.Contains(string(b), "end_of_execution") {
		t.Fatalf("150 KB cell: %d %.300s", resp.StatusCode, b)
	}
	resp = e.Do("POST", "/execute", body(contexts.MaxCodeLimit+1), e.Headers(sb, "49999")...)
	if got := decode[apiErr](t, resp); resp.StatusCode != 413 || !strings.Contains(got.Message, "limit") {
		t.Fatalf("oversized cell: %d %+v", resp.StatusCode, got)
	}
	resp = e.Do("POST", "/execute", strings.NewReader(`{"code":"1","language":"python","context_id":"x"}`), e.Headers(sb, "49999")...)
	if resp.StatusCode != 400 {
		t.Fatalf("context and language together: %d", resp.StatusCode)
	}
	resp = e.Do("POST", "/contexts", strings.NewReader(`{"language":"cobol"}`), e.Headers(sb, "49999")...)
	if got := decode[apiErr](t, resp); resp.StatusCode != 501 || !strings.Contains(got.Message, "not supported") {
		t.Fatalf("cobol context: %d %+v", resp.StatusCode, got)
	}
}

// TestRAndJavaOutsideTheirTemplate: on a sandbox whose image has no R or
// Java (the agent answers failed_precondition), runCode answers E2B's
// execution error NotSupportedError and createCodeContext 501, both naming
// the template that has them; where the agent runs them, they run.
func TestRAndJavaOutsideTheirTemplate(t *testing.T) {
	e, p := newManagerEnv(t, contexts.Config{})
	p.Run = func(ctx context.Context, s *contextstest.Sandbox, rp agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		if rp.Language == agent.R || rp.Language == agent.Java {
			return nil, fmt.Errorf("no %s kernel: /usr/bin/x is not installed in this sandbox: %w", rp.Language, errdefs.ErrFailedPrecondition)
		}
		return contextstest.Echo(ctx, s, rp, out)
	}
	sb := e.Create(key1, `{}`)
	for _, lang := range []string{"r", "java", "R"} {
		resp := e.Do("POST", "/execute", strings.NewReader(`{"code":"1","language":"`+lang+`"}`), e.Headers(sb, "49999")...)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"name":"NotSupportedError"`) ||
			!strings.Contains(string(b), `code-interpreter`) || !strings.Contains(string(b), "end_of_execution") {
			t.Fatalf("%s: %d %s", lang, resp.StatusCode, b)
		}
		resp = e.Do("POST", "/contexts", strings.NewReader(`{"language":"`+lang+`"}`), e.Headers(sb, "49999")...)
		if got := decode[apiErr](t, resp); resp.StatusCode != 501 || !strings.Contains(got.Message, "code-interpreter") {
			t.Fatalf("%s context: %d %+v", lang, resp.StatusCode, got)
		}
	}
	p.Run = nil // the echo kernel: every language runs
	resp := e.Do("POST", "/contexts", strings.NewReader(`{"language":"java","cwd":"/tmp/j"}`), e.Headers(sb, "49999")...)
	if got := decode[map[string]string](t, resp); resp.StatusCode != 200 || got["language"] != "java" || got["cwd"] != "/tmp/j" {
		t.Fatalf("java context where java runs: %d %+v", resp.StatusCode, got)
	}
}
