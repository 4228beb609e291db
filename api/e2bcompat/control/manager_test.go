package control_test

import (
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
)

// TestSandboxNotRotated: the manager's MaxExecutionsPerContext must not end
// an E2B sandbox under a running session; its lifecycle is timeout and kill.
func TestSandboxNotRotated(t *testing.T) {
	e, _ := newManagerEnv(t, contexts.Config{MaxExecutionsPerContext: 3})
	sb := e.Create(key1, `{}`)
	for i := range 10 {
		resp := e.Do("POST", "/execute", strings.NewReader(`{"code":"1","language":"python"}`), e.Headers(sb, "49999")...)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "end_of_execution") || strings.Contains(string(b), `"type":"error"`) {
			t.Fatalf("runCode %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	resp := e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)
	if resp.StatusCode != 200 {
		t.Fatalf("sandbox after 10 runCode calls with a rotation limit of 3: getInfo %d", resp.StatusCode)
	}
	if resp := e.Do("GET", "/health", nil, e.Headers(sb, "49983")...); resp.StatusCode != 204 {
		t.Fatalf("envd after 10 runCode calls: %d", resp.StatusCode)
	}
}

// TestUnknownTemplate: E2B's template names map to sandlot's default
// template (code-interpreter to the template of that name); any other name
// the manager does not know is a 404 with a JSON body, as E2B's cloud
// answers.
func TestUnknownTemplate(t *testing.T) {
	e, p := newManagerEnv(t, contexts.Config{Templates: []string{"default", "code-interpreter"}})
	for _, tmpl := range []string{"", "base", "code-interpreter-v1", "code-interpreter", "default"} {
		sb := e.Create(key1, `{"templateID":"`+tmpl+`"}`)
		want := tmpl
		if want == "" {
			want = "base"
		}
		if sb.TemplateID != want {
			t.Fatalf("templateID %q reported as %q", tmpl, sb.TemplateID)
		}
	}
	before := p.Created()
	for _, path := range []string{"/v2/sandboxes", "/sandboxes"} {
		resp := e.Do("POST", path, strings.NewReader(`{"templateID":"nope"}`), "X-API-KEY", key1, "Content-Type", "application/json")
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s nope: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if body := decode[apiErr](t, resp); body.Code != 404 || body.Message != "template nope not found" {
			t.Fatalf("%s nope: body %+v", path, body)
		}
	}
	if p.Created() != before {
		t.Fatal("a sandbox was created for an unknown template")
	}
}

// TestSandboxIsItsConversation: without a conversationId in metadata the
// sandbox id is the conversation; with one, the metadata sets the identity.
// The metadata shown is the caller's own: the identity keys appear only
// when the caller set them, but filtering on them finds the sandbox.
func TestSandboxIsItsConversation(t *testing.T) {
	e, _ := newManagerEnv(t, contexts.Config{})
	info := func(sb created) map[string]string {
		resp := e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)
		return decode[struct{ Metadata map[string]string }](t, resp).Metadata
	}
	sb := e.Create(key1, `{"metadata":{"k":"v"}}`)
	if m := info(sb); len(m) != 1 || m["k"] != "v" {
		t.Fatalf("metadata %v of sandbox %s, want the caller's only", m, sb.SandboxID)
	}
	resp := e.Do("GET", "/v2/sandboxes?metadata="+url.QueryEscape("conversationId="+sb.SandboxID+"&pathId=main"), nil, "X-API-KEY", key1)
	if l := decode[[]struct{ SandboxID string }](t, resp); len(l) != 1 || l[0].SandboxID != sb.SandboxID {
		t.Fatalf("list by identity: %v", l)
	}
	a := e.Create(key1, `{"metadata":{"conversationId":"conv-x","pathId":"p1"}}`)
	b := e.Create(key1, `{"metadata":{"conversationId":"conv-x","pathId":"p1"}}`)
	c := e.Create(key1, `{"metadata":{"conversationId":"conv-x"}}`)
	if a.SandboxID != b.SandboxID || a.SandboxID == c.SandboxID {
		t.Fatalf("sandboxes %s %s %s", a.SandboxID, b.SandboxID, c.SandboxID)
	}
	if m := info(c); m["conversationId"] != "conv-x" || m["pathId"] != "" {
		t.Fatalf("metadata %v", m)
	}
}

// TestTaskKeysTheSandbox: a taskId in metadata keys the sandbox before
// conversationId, so calls naming one task share a sandbox whatever their
// conversation.
func TestTaskKeysTheSandbox(t *testing.T) {
	e, _ := newManagerEnv(t, contexts.Config{})
	a := e.Create(key1, `{"metadata":{"taskId":"task-1","conversationId":"conv-y"}}`)
	b := e.Create(key1, `{"metadata":{"taskId":"task-1","conversationId":"conv-z"}}`)
	c := e.Create(key1, `{"metadata":{"taskId":"task-1"}}`)
	d := e.Create(key1, `{"metadata":{"conversationId":"conv-y"}}`)
	if a.SandboxID != b.SandboxID || a.SandboxID != c.SandboxID || a.SandboxID == d.SandboxID {
		t.Fatalf("sandboxes %s %s %s %s: want the first three equal, the last apart", a.SandboxID, b.SandboxID, c.SandboxID, d.SandboxID)
	}
}

// TestUserKeysTheSandbox: a userId in metadata is part of the key, so two
// users who name the same task or conversation get two sandboxes, one
// user gets one, and listing by userId finds that user's only. A userId
// past the identity bound is a 400.
func TestUserKeysTheSandbox(t *testing.T) {
	e, _ := newManagerEnv(t, contexts.Config{})
	a := e.Create(key1, `{"metadata":{"userId":"alice","taskId":"task-1"}}`)
	b := e.Create(key1, `{"metadata":{"userId":"bob","taskId":"task-1"}}`)
	c := e.Create(key1, `{"metadata":{"userId":"alice","taskId":"task-1"}}`)
	d := e.Create(key1, `{"metadata":{"taskId":"task-1"}}`)
	if a.SandboxID == b.SandboxID || a.SandboxID != c.SandboxID || d.SandboxID == a.SandboxID || d.SandboxID == b.SandboxID {
		t.Fatalf("sandboxes alice %s, bob %s, alice again %s, no user %s", a.SandboxID, b.SandboxID, c.SandboxID, d.SandboxID)
	}
	resp := e.Do("GET", "/v2/sandboxes?metadata="+url.QueryEscape("userId=bob"), nil, "X-API-KEY", key1)
	if l := decode[[]struct{ SandboxID string }](t, resp); len(l) != 1 || l[0].SandboxID != b.SandboxID {
		t.Fatalf("list by user bob: %v, want %s", l, b.SandboxID)
	}
	resp = e.Do("POST", "/v2/sandboxes", strings.NewReader(`{"metadata":{"userId":"`+strings.Repeat("u", 257)+`"}}`),
		"X-API-KEY", key1, "Content-Type", "application/json")
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || !strings.Contains(string(body), "userId") {
		t.Fatalf("a 257-byte userId: %d %s", resp.StatusCode, body)
	}
}
