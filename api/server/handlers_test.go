package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

func TestToolCall(t *testing.T) {
	e := newEnv(t, nil)
	r1 := e.runCode(t, e.KeyA, "c1", "", "x=41")
	if r1.ConversationID != "c1" || r1.PathID != "main" {
		t.Fatalf("identity: %+v", r1)
	}
	r2 := e.runCode(t, e.KeyA, "c1", "main", "print(x)")
	if r2.Stdout != "41\n" || r2.SandboxID != r1.SandboxID {
		t.Fatalf("state across calls: %+v", r2)
	}

	t.Run("generated conversation id", func(t *testing.T) {
		r := e.runCode(t, e.KeyA, "", "", "hi")
		if len(r.ConversationID) != 36 {
			t.Fatalf("conversationId %q", r.ConversationID)
		}
		again := e.runCode(t, e.KeyA, r.ConversationID, "", "hi")
		if again.SandboxID != r.SandboxID {
			t.Fatal("the generated conversation is not reusable")
		}
	})
	t.Run("taskId stands in", func(t *testing.T) {
		w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: map[string]any{
			"taskId": "task-9", "args": map[string]any{"language": "python", "code": "x"},
		}})
		var r api.RunCodeResult
		json.Unmarshal(w.Body.Bytes(), &r)
		if r.ConversationID != "task-9" {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
	t.Run("taskId comes before conversationId", func(t *testing.T) {
		w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: map[string]any{
			"taskId": "task-9", "conversationId": "conv-1", "args": map[string]any{"language": "python", "code": "x"},
		}})
		var r api.RunCodeResult
		json.Unmarshal(w.Body.Bytes(), &r)
		if r.ConversationID != "task-9" {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
	t.Run("list tools", func(t *testing.T) {
		for _, f := range []string{"", "openai", "anthropic", "mcp"} {
			if w := e.do(t, req{method: "GET", path: "/v1/tools?format=" + f, key: e.KeyA}); w.Code != 200 {
				t.Errorf("format %q: %d", f, w.Code)
			}
		}
	})
}

func TestPathEvent(t *testing.T) {
	e := newEnv(t, nil)
	e.runCode(t, e.KeyA, "c", "p1", "x=1")
	w := e.do(t, req{method: "POST", path: "/v1/conversations/c/paths/p1/events", key: e.KeyA, body: map[string]any{"type": "deleted"}})
	if w.Code != 204 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = e.do(t, req{method: "GET", path: "/v1/contexts?conversationId=c&status=active", key: e.KeyA})
	var l api.ContextList
	json.Unmarshal(w.Body.Bytes(), &l)
	if len(l.Contexts) != 0 {
		t.Fatalf("still active: %s", w.Body)
	}
	w = e.do(t, req{method: "POST", path: "/v1/conversations/c/paths/p2/events", key: e.KeyA, body: map[string]any{"type": "branched", "sourcePathId": "p1"}})
	if w.Code != 204 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	want := []contexts.PathEvent{{Type: "deleted"}, {Type: "branched", SourcePathID: "p1"}}
	if d := cmp.Diff(want, e.Contexts.Events); d != "" {
		t.Fatal(d)
	}
}

// TestEndConversation: DELETE /v1/conversations/{id} ends every path of
// the caller's conversation and nothing of another tenant's.
func TestEndConversation(t *testing.T) {
	e := newEnv(t, nil)
	e.runCode(t, e.KeyA, "c", "p1", "x=1")
	e.runCode(t, e.KeyA, "c", "p2", "x=1")
	e.runCode(t, e.KeyB, "c", "p1", "x=1")
	w := e.do(t, req{method: "DELETE", path: "/v1/conversations/c", key: e.KeyA})
	var got api.ConversationEnded
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 || got != (api.ConversationEnded{ConversationID: "c", Terminated: 2}) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	for key, want := range map[string]int{e.KeyA: 0, e.KeyB: 1} {
		w = e.do(t, req{method: "GET", path: "/v1/contexts?conversationId=c&status=active", key: key})
		var l api.ContextList
		json.Unmarshal(w.Body.Bytes(), &l)
		if len(l.Contexts) != want {
			t.Errorf("active contexts after the end: %s, want %d", w.Body, want)
		}
	}
	long := strings.Repeat("c", 300)
	if w = e.do(t, req{method: "DELETE", path: "/v1/conversations/" + long, key: e.KeyA}); w.Code != 400 {
		t.Errorf("over-long conversation id: %d %s", w.Code, w.Body)
	}
}

func TestContexts(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []string{"c1", "c2", "c3"} {
		e.runCode(t, e.KeyA, c, "", "x=1")
	}
	w := e.do(t, req{method: "GET", path: "/v1/contexts?limit=2", key: e.KeyA})
	var l api.ContextList
	json.Unmarshal(w.Body.Bytes(), &l)
	if len(l.Contexts) != 2 || l.Next == "" {
		t.Fatalf("%s", w.Body)
	}
	id := l.Contexts[0].ID
	w = e.do(t, req{method: "GET", path: "/v1/contexts/" + id, key: e.KeyA})
	var rec contexts.Record
	json.Unmarshal(w.Body.Bytes(), &rec)
	if w.Code != 200 || rec.ID != id || rec.State != contexts.StateReady {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w = e.do(t, req{method: "DELETE", path: "/v1/contexts/" + id, key: e.KeyA}); w.Code != 204 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	w = e.do(t, req{method: "GET", path: "/v1/contexts?status=terminated", key: e.KeyA})
	json.Unmarshal(w.Body.Bytes(), &l)
	if len(l.Contexts) != 1 || l.Contexts[0].TerminationReason != string(contexts.ReasonManual) {
		t.Fatalf("%s", w.Body)
	}
	w = e.do(t, req{method: "GET", path: "/v1/metrics/sessions", key: e.KeyA})
	var m map[string]any
	json.Unmarshal(w.Body.Bytes(), &m)
	for _, k := range []string{"active_sessions", "total_created", "total_reused", "total_cleaned", "health_check_failures", "per_template"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics lack %s: %s", k, w.Body)
		}
	}
}

// TestSessionMetrics: the manager's counters of the caller's tenant in the
// wire's names: totals, per template, and split into execution and
// desktop sessions (the desktop template's contexts), which add up to the
// totals; the warm pool's size is the daemon's.
func TestSessionMetrics(t *testing.T) {
	e := newEnv(t, nil)
	e.Contexts.Counters = &contexts.Stats{Active: 9, TotalCreated: 9, PoolSize: 2}
	e.Contexts.TenantCounters = map[string]contexts.Stats{"tenant-a": {Active: 5, TotalCreated: 8, TotalReused: 7, TotalCleaned: 3, TotalTerminated: 5, HealthCheckFailures: 1,
		PoolHits: 4, PoolMisses: 1,
		PerTemplate: map[string]contexts.TemplateStats{
			"default": {Active: 3, TotalCreated: 5, TotalReused: 7, TotalCleaned: 2, TotalTerminated: 4, HealthCheckFailures: 1, PoolHits: 4, PoolMisses: 1},
			"desktop": {Active: 2, TotalCreated: 3, TotalCleaned: 1, TotalTerminated: 1},
		}}}
	w := e.do(t, req{method: "GET", path: "/v1/metrics/sessions", key: e.KeyA})
	row := `{"active_sessions":3,"total_created":5,"total_reused":7,"total_cleaned":2,"total_terminated":4,"health_check_failures":1}`
	desk := `{"active_sessions":2,"total_created":3,"total_reused":0,"total_cleaned":1,"total_terminated":1,"health_check_failures":0}`
	total := `{"active_sessions":5,"total_created":8,"total_reused":7,"total_cleaned":3,"total_terminated":5,"health_check_failures":1}`
	want := total[:len(total)-1] + `,"pool_size":2,"pool_hits":4,"pool_misses":1,"per_template":{"default":` + row + `,"desktop":` + desk + `},` +
		`"execution":` + row + `,"desktop":` + desk + `,"totals":` + total + `,"tenant":"tenant-a"}` + "\n"
	if w.Code != 200 || w.Body.String() != want {
		t.Fatalf("%d %s\nwant %s", w.Code, w.Body, want)
	}
}

// TestStreaming runs over a real listener so flushing is exercised: the
// stdout lines arrive in order, then exactly one final event.
func TestStreaming(t *testing.T) {
	e := newEnv(t, nil)
	ts := httptest.NewServer(e.Handler)
	defer ts.Close()
	call := func(code string) (*http.Response, []api.Event) {
		body, _ := json.Marshal(map[string]any{"conversationId": "s", "args": map[string]any{"language": "python", "code": code}})
		hr, _ := http.NewRequest("POST", ts.URL+"/v1/tools/run_code", bytes.NewReader(body))
		hr.Header.Set("X-API-KEY", e.KeyA)
		hr.Header.Set("Accept", api.ContentTypeNDJSON)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var evs []api.Event
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev api.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			evs = append(evs, ev)
		}
		return resp, evs
	}
	resp, evs := call("one\ntwo\nthree")
	if resp.Header.Get("Content-Type") != api.ContentTypeNDJSON {
		t.Fatal(resp.Header)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type+":"+ev.Data)
	}
	want := []string{"stdout:one\n", "stdout:two\n", "stdout:three\n", "final:"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	var final api.RunCodeResult
	json.Unmarshal(evs[3].Result, &final)
	if final.Stdout != "one\ntwo\nthree\n" || final.ConversationID != "s" {
		t.Fatalf("%+v", final)
	}
	// A failure before any output keeps its status.
	resp, _ = call(strings.Repeat("x", 100<<10+1))
	if resp.StatusCode != 400 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// A failure after output is the last event, without internals.
	resp, evs = call("one\nfail")
	if resp.StatusCode != 200 || len(evs) != 2 || evs[1].Type != api.EventError || evs[1].Code != errdefs.CodeInternal || strings.Contains(evs[1].Message, "/var") {
		t.Fatalf("%d %+v", resp.StatusCode, evs)
	}
}
