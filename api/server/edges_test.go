package server_test

import (
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs/errdefstest"
)

// TestErrorEdge walks every category through /v1: a route's failure and
// a tool call's (plain and streamed) answer its status with {code,
// message} where message is one public sentence without the chain's
// internals, and a server fault names its request id.
func TestErrorEdge(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range errdefstest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			for _, call := range []struct {
				edge string
				r    req
				set  func()
			}{
				{"GET /v1/contexts", req{method: "GET", path: "/v1/contexts"}, func() { e.Contexts.FailAll, e.Tools.Fail = c.Err, nil }},
				{"POST /v1/tools/run_code", req{method: "POST", path: "/v1/tools/run_code", body: `{}`}, func() { e.Contexts.FailAll, e.Tools.Fail = nil, c.Err }},
				{"POST /v1/tools/run_code (stream)", req{method: "POST", path: "/v1/tools/run_code", body: `{}`,
					header: map[string]string{"Accept": api.ContentTypeNDJSON}}, func() { e.Contexts.FailAll, e.Tools.Fail = nil, c.Err }},
			} {
				call.set()
				call.r.key = e.KeyA
				if call.r.header == nil {
					call.r.header = map[string]string{}
				}
				call.r.header[api.HeaderRequestID] = "req-edge"
				w := e.do(t, call.r)
				if w.Code != c.Status {
					t.Errorf("%s: status %d, want %d", call.edge, w.Code, c.Status)
				}
				got := decodeErr(t, w)
				if got.Code != c.Code {
					t.Errorf("%s: code %q, want %q", call.edge, got.Code, c.Code)
				}
				errdefstest.Check(t, call.edge, c, got.Message)
				if want := map[bool]string{true: "req-edge"}[c.ServerFault]; got.RequestID != want {
					t.Errorf("%s: requestId %q, want %q", call.edge, got.RequestID, want)
				}
			}
		})
	}
	e.Contexts.FailAll, e.Tools.Fail = nil, nil
}

// TestUnknownBodyField: a misspelt field of a /v1 body names the fields
// the body takes, as the tools' arguments do, without Go's decoder text.
func TestUnknownBodyField(t *testing.T) {
	e := newEnv(t, nil)
	w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: `{"conversation_id":"c","args":{}}`})
	got := decodeErr(t, w)
	want := `unknown field "conversation_id" (allowed: args, conversationId, network, pathId, secrets, taskId, userId)`
	if w.Code != 400 || got.Code != "invalid_argument" || got.Message != want {
		t.Fatalf("%d %+v, want 400 %q", w.Code, got, want)
	}
}
