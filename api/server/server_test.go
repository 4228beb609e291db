package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
)

type env struct {
	*servertest.Env
}

func newEnv(t *testing.T, mod func(*server.Config)) *env {
	t.Helper()
	return &env{servertest.NewEnv(func(c *server.Config) {
		c.MaxBodyBytes, c.MaxUploadBytes = 256<<10, 3<<20
		if mod != nil {
			mod(c)
		}
	})}
}

type req struct {
	method, path, key string
	body              any // string, []byte or a value to encode
	header            map[string]string
}

func (e *env) do(t *testing.T, r req) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	if r.key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.key)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.Handler.ServeHTTP(w, hr)
	return w
}

// runCode calls run_code for tenant key and returns the decoded result.
func (e *env) runCode(t *testing.T, key, conv, path, code string) api.RunCodeResult {
	t.Helper()
	w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: key, body: map[string]any{
		"conversationId": conv, "pathId": path, "args": map[string]any{"language": "python", "code": code},
	}})
	if w.Code != 200 {
		t.Fatalf("run_code: %d %s", w.Code, w.Body)
	}
	var res api.RunCodeResult
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func decodeErr(t *testing.T, w *httptest.ResponseRecorder) api.Error {
	t.Helper()
	var e api.Error
	if ct := w.Header().Get("Content-Type"); ct != api.ContentTypeJSON {
		t.Fatalf("error content type %q, body %s", ct, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Code == "" || e.Message == "" {
		t.Fatalf("error body %q is not {code,message}: %v", w.Body, err)
	}
	return e
}

func TestPublicRoutes(t *testing.T) {
	e := newEnv(t, func(c *server.Config) {
		c.Ready = map[string]server.Check{"store": func(context.Context) error { return nil }}
	})
	for _, p := range []string{"/healthz", "/readyz", "/v1/openapi.json"} {
		if w := e.do(t, req{method: "GET", path: p}); w.Code != 200 {
			t.Errorf("%s: %d", p, w.Code)
		}
	}
	e2 := newEnv(t, func(c *server.Config) {
		c.Ready = map[string]server.Check{"store": func(context.Context) error { return errors.New("postgres://u:pw@h/db down") }}
	})
	w := e2.do(t, req{method: "GET", path: "/readyz"})
	if w.Code != 503 || strings.Contains(w.Body.String(), "pw@") {
		t.Fatalf("readyz with a failing check: %d %s", w.Code, w.Body)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, nil)
	ctxID := e.runCode(t, e.KeyA, "c", "main", "x=1").SandboxID
	_ = ctxID
	recs, _ := e.Contexts.List(context.Background(), contexts.Filter{TenantID: "tenant-a"})
	id := recs[0].ID
	run := func(args any) map[string]any { return map[string]any{"conversationId": "c", "args": args} }
	big := strings.Repeat("x", 100<<10+1)
	tests := []struct {
		name   string
		r      req
		status int
		code   errdefs.Code
	}{
		{"malformed JSON", req{method: "POST", path: "/v1/tools/run_code", body: `{"args": `}, 400, errdefs.CodeInvalidArgument},
		{"not an object", req{method: "POST", path: "/v1/tools/run_code", body: `[1]`}, 400, errdefs.CodeInvalidArgument},
		{"trailing data", req{method: "POST", path: "/v1/tools/run_code", body: `{} {}`}, 400, errdefs.CodeInvalidArgument},
		{"unknown field", req{method: "POST", path: "/v1/tools/run_code", body: `{"conversation_id":"c"}`}, 400, errdefs.CodeInvalidArgument},
		{"wrong type", req{method: "POST", path: "/v1/tools/run_code", body: `{"conversationId":5}`}, 400, errdefs.CodeInvalidArgument},
		{"control char in id", req{method: "POST", path: "/v1/tools/run_code", body: map[string]any{"conversationId": "a\x01"}}, 400, errdefs.CodeInvalidArgument},
		{"id too long", req{method: "POST", path: "/v1/tools/run_code", body: map[string]any{"pathId": strings.Repeat("p", 300)}}, 400, errdefs.CodeInvalidArgument},
		{"unknown tool", req{method: "POST", path: "/v1/tools/nope", body: run(map[string]any{})}, 404, errdefs.CodeNotFound},
		{"unknown language", req{method: "POST", path: "/v1/tools/run_code", body: run(map[string]any{"language": "cobol", "code": "x"})}, 400, errdefs.CodeInvalidArgument},
		{"code over 100 KB", req{method: "POST", path: "/v1/tools/run_code", body: run(map[string]any{"language": "python", "code": big})}, 400, errdefs.CodeInvalidArgument},
		{"timeout too small", req{method: "POST", path: "/v1/tools/run_code", body: run(map[string]any{"language": "python", "code": "x", "timeout": 5})}, 400, errdefs.CodeInvalidArgument},
		{"timeout too big", req{method: "POST", path: "/v1/tools/run_code", body: run(map[string]any{"language": "python", "code": "x", "timeout": 600001})}, 400, errdefs.CodeInvalidArgument},
		{"body over the limit", req{method: "POST", path: "/v1/tools/run_code", body: run(map[string]any{"language": "python", "code": strings.Repeat("x", 300<<10)})}, 413, errdefs.CodeResourceExhausted},
		{"unknown context", req{method: "GET", path: "/v1/contexts/nope"}, 404, errdefs.CodeNotFound},
		{"delete unknown context", req{method: "DELETE", path: "/v1/contexts/nope"}, 404, errdefs.CodeNotFound},
		{"bad status filter", req{method: "GET", path: "/v1/contexts?status=sleeping"}, 400, errdefs.CodeInvalidArgument},
		{"bad limit", req{method: "GET", path: "/v1/contexts?limit=0"}, 400, errdefs.CodeInvalidArgument},
		{"bad event type", req{method: "POST", path: "/v1/conversations/c/paths/main/events", body: map[string]any{"type": "forked"}}, 400, errdefs.CodeInvalidArgument},
		{"malformed event", req{method: "POST", path: "/v1/conversations/c/paths/main/events", body: `{`}, 400, errdefs.CodeInvalidArgument},
		{"bad tools format", req{method: "GET", path: "/v1/tools?format=yaml"}, 400, errdefs.CodeInvalidArgument},
		{"upload without path", req{method: "PUT", path: "/v1/contexts/" + id + "/files", body: "x"}, 400, errdefs.CodeInvalidArgument},
		{"upload traversal", req{method: "PUT", path: "/v1/contexts/" + id + "/files?path=../../etc/passwd", body: "x"}, 400, errdefs.CodeInvalidArgument},
		{"upload absolute outside", req{method: "PUT", path: "/v1/contexts/" + id + "/files?path=/etc/passwd", body: "x"}, 400, errdefs.CodeInvalidArgument},
		{"upload prefix trick", req{method: "PUT", path: "/v1/contexts/" + id + "/files?path=/home/username/x", body: "x"}, 400, errdefs.CodeInvalidArgument},
		{"download traversal", req{method: "GET", path: "/v1/contexts/" + id + "/files?path=/tmp/../proc/1/environ"}, 400, errdefs.CodeInvalidArgument},
		{"list traversal", req{method: "GET", path: "/v1/contexts/" + id + "/files/list?path=/"}, 400, errdefs.CodeInvalidArgument},
		{"conversation traversal", req{method: "GET", path: "/v1/conversations/c/paths/main/files?path=../../../etc/shadow"}, 400, errdefs.CodeInvalidArgument},
		{"bad depth", req{method: "GET", path: "/v1/contexts/" + id + "/files/list?depth=99"}, 400, errdefs.CodeInvalidArgument},
		{"upload over the limit", req{method: "PUT", path: "/v1/contexts/" + id + "/files?path=big", body: bytes.Repeat([]byte("x"), 3<<20+1)}, 413, errdefs.CodeResourceExhausted},
		{"download missing file", req{method: "GET", path: "/v1/contexts/" + id + "/files?path=nope.txt"}, 404, errdefs.CodeNotFound},
		{"files of unknown context", req{method: "GET", path: "/v1/contexts/nope/files/list"}, 404, errdefs.CodeNotFound},
		{"unknown route", req{method: "GET", path: "/v1/nothing"}, 404, errdefs.CodeNotFound},
		{"wrong method", req{method: "PATCH", path: "/v1/contexts/" + id}, 405, errdefs.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.key = e.KeyA
			w := e.do(t, tt.r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if got := decodeErr(t, w).Code; got != tt.code {
				t.Errorf("code %q, want %q", got, tt.code)
			}
		})
	}
	t.Run("streamed upload over the limit leaves no file", func(t *testing.T) {
		hr := httptest.NewRequest("PUT", "/v1/contexts/"+id+"/files?path=big2", io.MultiReader(bytes.NewReader(make([]byte, 3<<20)), strings.NewReader("xx")))
		hr.ContentLength = -1
		hr.Header.Set("X-API-KEY", e.KeyA)
		w := httptest.NewRecorder()
		e.Handler.ServeHTTP(w, hr)
		if w.Code != 413 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if _, ok := e.Contexts.File(id, "/home/user/big2"); ok {
			t.Fatal("partial upload left behind")
		}
	})
	t.Run("terminated context has no files", func(t *testing.T) {
		rid := e.runCode(t, e.KeyB, "gone", "main", "x").SandboxID
		_ = rid
		recs, _ := e.Contexts.List(context.Background(), contexts.Filter{TenantID: "tenant-b", ConversationID: "gone"})
		e.Contexts.Terminate(context.Background(), "tenant-b", recs[0].ID, contexts.ReasonManual)
		w := e.do(t, req{method: "GET", path: "/v1/contexts/" + recs[0].ID + "/files/list", key: e.KeyB})
		if w.Code != 412 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
}

// TestServerFaults: an uncategorised error is a 500 whose body says
// nothing about it.
func TestServerFaults(t *testing.T) {
	e := newEnv(t, nil)
	e.Tools.Fail = errors.New("open /var/lib/sandlot/secret.db: permission denied")
	w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: `{}`})
	if w.Code != 500 || strings.Contains(w.Body.String(), "secret") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := decodeErr(t, w); !strings.HasPrefix(got.Message, "Internal error; retry") {
		t.Fatalf("%+v", got)
	}
	e.Tools.Fail = nil
	w = e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: map[string]any{"args": map[string]any{"language": "python", "code": "fail"}}})
	if w.Code != 500 || strings.Contains(w.Body.String(), "/var/lib") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	e.Contexts.FailAll = errors.New("sql: database is locked at /data/x.db")
	w = e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyA})
	if w.Code != 500 || strings.Contains(w.Body.String(), "locked") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	e.Contexts.FailAll = fmtErr("provider down", errdefs.ErrUnavailable)
	w = e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyA})
	if w.Code != 503 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// TestServerFaultLogging: a 5xx category (unavailable, deadline_exceeded)
// is logged as a server fault with its whole chain and the request id,
// like an uncategorized error, and the caller reads the category's
// sentence; a client fault (4xx) keeps its message and is not logged as a
// fault.
func TestServerFaultLogging(t *testing.T) {
	var mu sync.Mutex
	var logs bytes.Buffer
	e := newEnv(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	})
	faults := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(logs.String(), `"msg":"server fault"`)
	}
	tests := []struct {
		err        error
		status     int
		fault      bool
		publicText string
	}{
		{fmtErr("no such context", errdefs.ErrNotFound), 404, false, "no such context"},
		{fmtErr("bad filter", errdefs.ErrInvalidArgument), 400, false, "bad filter"},
		{fmtErr("provider down", errdefs.ErrUnavailable), 503, true, "retry in a few seconds"},
		{fmtErr("store too slow", errdefs.ErrDeadlineExceeded), 504, true, "did not finish in time"},
		{errors.New("sql: database is locked"), 500, true, "Internal error"},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			before := faults()
			e.Contexts.FailAll = tc.err
			rid := "req-" + strings.Fields(tc.err.Error())[0]
			w := e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyA, header: map[string]string{api.HeaderRequestID: rid}})
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if got := decodeErr(t, w).Message; !strings.Contains(got, tc.publicText) {
				t.Errorf("message %q, want it to contain %q", got, tc.publicText)
			}
			if logged := faults() > before; logged != tc.fault {
				t.Errorf("logged as a server fault: %v, want %v", logged, tc.fault)
			}
			if tc.fault {
				mu.Lock()
				log := logs.String()
				mu.Unlock()
				cause := strings.Fields(tc.err.Error())[1]
				if !strings.Contains(log, cause) || !strings.Contains(log, `"request_id":"`+rid+`"`) || decodeErr(t, w).RequestID != rid {
					t.Errorf("the log lacks the chain or the request id %q: %s", rid, log)
				}
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func fmtErr(msg string, cat error) error { return errors.Join(errors.New(msg), cat) }

func TestFiles(t *testing.T) {
	e := newEnv(t, nil)
	e.runCode(t, e.KeyA, "c", "main", "x=1")
	recs, _ := e.Contexts.List(context.Background(), contexts.Filter{TenantID: "tenant-a"})
	id := recs[0].ID
	// Bigger than one chunk, so the upload takes several offset writes.
	data := bytes.Repeat([]byte("0123456789abcdef"), (2<<20+123)/16)
	w := e.do(t, req{method: "PUT", path: "/v1/contexts/" + id + "/files?path=data/in.bin", key: e.KeyA, body: data})
	if w.Code != 200 {
		t.Fatalf("upload: %d %s", w.Code, w.Body)
	}
	w = e.do(t, req{method: "GET", path: "/v1/contexts/" + id + "/files?path=/home/user/data/in.bin", key: e.KeyA})
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), data) {
		t.Fatalf("download: %d, %d bytes", w.Code, w.Body.Len())
	}
	w = e.do(t, req{method: "GET", path: "/v1/contexts/" + id + "/files/list?path=data", key: e.KeyA})
	var fl api.FileList
	json.Unmarshal(w.Body.Bytes(), &fl)
	if w.Code != 200 || len(fl.Entries) != 1 || fl.Entries[0].Size != int64(len(data)) {
		t.Fatalf("list: %d %s", w.Code, w.Body)
	}
	// The conversation-addressed routes reach the same sandbox.
	w = e.do(t, req{method: "GET", path: "/v1/conversations/c/paths/main/files?path=data/in.bin", key: e.KeyA})
	if w.Code != 200 || w.Body.Len() != len(data) {
		t.Fatalf("by conversation: %d", w.Code)
	}
	w = e.do(t, req{method: "PUT", path: "/v1/conversations/new/paths/main/files?path=/tmp/empty", key: e.KeyA, body: ""})
	if w.Code != 200 {
		t.Fatalf("empty upload: %d %s", w.Code, w.Body)
	}
}

// Nothing on /v1 decodes Content-Encoding: a compressed body is refused
// with 415, not taken as its compressed bytes.
func TestCompressedBody(t *testing.T) {
	e := newEnv(t, nil)
	w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: "\x1f\x8b\x08\x00",
		header: map[string]string{"Content-Encoding": "gzip", "Content-Type": "application/json"}})
	if w.Code != http.StatusUnsupportedMediaType {
		t.Fatalf("status %d %s, want 415", w.Code, w.Body)
	}
	decodeErr(t, w)
}

func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t, nil)
	w := e.do(t, req{method: "GET", path: "/v1/openapi.json"})
	if w.Code != 200 || w.Body.String() != string(api.OpenAPI) {
		t.Fatalf("%d", w.Code)
	}
}

func TestAudit(t *testing.T) {
	e := newEnv(t, nil)
	for i, k := range []string{audit.KindGuardFinding, audit.KindKeyRotated, audit.KindGuardFinding} {
		e.Audit = append(e.Audit, audit.Event{ID: int64(i + 1), TenantID: "tenant-a", Kind: k,
			Detail: map[string]string{"type": "EMAIL", "start": "3", "end": "20", "hmac": "ab"}})
	}
	e.Audit = append(e.Audit, audit.Event{ID: 9, TenantID: "tenant-b", Kind: audit.KindGuardFinding})
	get := func(q string) (int, api.AuditList) {
		w := e.do(t, req{method: "GET", path: "/v1/audit" + q, key: e.KeyA})
		var l api.AuditList
		if w.Code == 200 {
			if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
		}
		return w.Code, l
	}
	ids := func(l api.AuditList) (out []int64) {
		for _, ev := range l.Events {
			out = append(out, ev.ID)
		}
		return out
	}
	if code, l := get(""); code != 200 || !cmp.Equal(ids(l), []int64{3, 2, 1}) || l.Events[0].Detail["start"] != "3" {
		t.Fatalf("all: %d %+v", code, l)
	}
	if code, l := get("?kind=guard.finding"); code != 200 || !cmp.Equal(ids(l), []int64{3, 1}) {
		t.Fatalf("kind: %d %+v", code, l)
	}
	if code, l := get("?limit=1"); code != 200 || !cmp.Equal(ids(l), []int64{3}) {
		t.Fatalf("limit: %d %+v", code, l)
	}
	// The newest event of a kind behind a newer one of another kind: the
	// limit counts that kind's events.
	if code, l := get("?kind=tenant.key_rotated&limit=1"); code != 200 || !cmp.Equal(ids(l), []int64{2}) {
		t.Fatalf("kind and limit: %d %+v", code, l)
	}
	if code, l := get("?kind=nothing"); code != 200 || l.Events == nil || len(l.Events) != 0 {
		t.Fatalf("empty: %d %+v", code, l)
	}
	for _, q := range []string{"?limit=0", "?limit=x", "?limit=1001"} {
		if code, _ := get(q); code != 400 {
			t.Errorf("%s: %d", q, code)
		}
	}
	noAudit := newEnv(t, func(c *server.Config) { c.Audit = nil })
	if w := noAudit.do(t, req{method: "GET", path: "/v1/audit", key: noAudit.KeyA}); w.Code != 503 {
		t.Errorf("without a trail: %d %s", w.Code, w.Body)
	}
}

// TestErrorMessagesSanitized: a client-fault message leaves without host
// paths, Go source positions or secrets, on plain and streamed calls.
func TestErrorMessagesSanitized(t *testing.T) {
	e := newEnv(t, nil)
	e.Tools.Fail = fmt.Errorf("start sandbox: open /run/sandlot/sandboxes/sb-1/config.json (manager.go:123) for ops@exemplar.ie: %w", errdefs.ErrFailedPrecondition)
	for _, accept := range []string{"", api.ContentTypeNDJSON} {
		w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: `{}`, header: map[string]string{"Accept": accept}})
		body := w.Body.String()
		if w.Code != 412 || strings.Contains(body, "/run/sandlot") || strings.Contains(body, "manager.go") || strings.Contains(body, "ops@exemplar.ie") {
			t.Fatalf("accept %q: %d %s", accept, w.Code, body)
		}
		if msg := decodeErr(t, w).Message; !strings.Contains(msg, "start sandbox: open [internal]") || !strings.Contains(msg, "[REDACTED:EMAIL]") {
			t.Errorf("accept %q: message %q", accept, msg)
		}
	}
}
