package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
	"github.com/sandlot/sandlot/tools"
	"github.com/sandlot/sandlot/tools/toolstest"
)

// runResult decodes a run_code tool result, checking that the text content
// and the structured content agree.
func runResult(t *testing.T, res *sdk.CallToolResult) tools.RunCodeResult {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	var fromText, fromStructured tools.RunCodeResult
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil {
		t.Fatalf("text content %q: %v", text(res), err)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fromStructured); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	if fromText.Stdout != fromStructured.Stdout || fromText.Success != fromStructured.Success {
		t.Errorf("text %+v and structured %+v differ", fromText, fromStructured)
	}
	return fromStructured
}

func text(res *sdk.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func runCode(t *testing.T, cs *sdk.ClientSession, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: args})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	return res
}

// exercise runs the scenario every transport must pass: list the tools,
// keep state across two calls, redact a secret, report errors as tool
// errors, and honour pathId.
func exercise(t *testing.T, s *stack, cs *sdk.ClientSession, tenant string) contexts.Identity {
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*sdk.Tool{}
	for _, tl := range lt.Tools {
		names[tl.Name] = tl
	}
	for _, want := range s.reg.Tools() {
		tl, ok := names[want.Name]
		if !ok {
			t.Errorf("tool %s not listed", want.Name)
			continue
		}
		schema, _ := json.Marshal(tl.InputSchema)
		if !strings.Contains(string(schema), `"conversationId"`) || !strings.Contains(string(schema), `"additionalProperties":false`) {
			t.Errorf("tool %s schema lacks identity args or strictness: %s", tl.Name, schema)
		}
	}
	if len(lt.Tools) != len(s.reg.Tools()) {
		t.Errorf("%d tools listed, want %d", len(lt.Tools), len(s.reg.Tools()))
	}

	// State persists between calls of one session.
	r1 := runResult(t, runCode(t, cs, map[string]any{"language": "python", "code": "x = 41"}))
	if !r1.Success {
		t.Fatalf("first call: %+v", r1)
	}
	first := s.lastCall(t)
	r2 := runResult(t, runCode(t, cs, map[string]any{"language": "python", "code": "print(x + 1)"}))
	if !r2.Success || r2.Stdout != "42\n" {
		t.Fatalf("second call: %+v (error %+v)", r2, r2.Error)
	}
	second := s.lastCall(t)
	if first.Identity != second.Identity || first.Identity.TenantID != tenant ||
		first.Identity.ConversationID == "" || first.Identity.PathID != contexts.DefaultPath {
		t.Errorf("identities %+v, %+v; want tenant %s, one conversation, path main", first.Identity, second.Identity, tenant)
	}
	if first.Forced {
		t.Error("an MCP call was recorded as forced")
	}

	// Another path of the conversation is another context: no x there.
	r3 := runResult(t, runCode(t, cs, map[string]any{"language": "python", "code": "print(x)", "pathId": "branch-b"}))
	if r3.Success || r3.Error == nil || r3.Error.Name != "NameError" {
		t.Errorf("pathId branch-b saw main's state: %+v", r3)
	}
	if ev := s.lastCall(t); ev.Identity.PathID != "branch-b" || ev.Identity.ConversationID != first.Identity.ConversationID {
		t.Errorf("branch identity = %+v", ev.Identity)
	}

	// A secret printed by the code comes back redacted.
	secret := toolstest.FakeOpenAIKey()
	if got := s.guard.Text(ctx, tenant, secret); got == secret {
		t.Fatalf("precondition: the guard does not redact %s", secret)
	}
	half := len(secret) / 2
	code := "k = " + jsonString(secret[:half]) + " + " + jsonString(secret[half:]) + "\nprint('key:', k)"
	r4 := runResult(t, runCode(t, cs, map[string]any{"language": "python", "code": code}))
	if strings.Contains(r4.Stdout, secret) || !strings.Contains(r4.Stdout, "[REDACTED:") {
		t.Errorf("secret not redacted: %q", r4.Stdout)
	}

	// With a progress token, output streams as progress notifications.
	res := runCodeWithProgress(t, cs, map[string]any{"language": "python", "code": "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.05)"})
	if r := runResult(t, res); r.Stdout != "tick 0\ntick 1\ntick 2\n" {
		t.Errorf("progress run: %+v", r)
	}

	// Bad arguments are a tool error with the public message.
	res = runCode(t, cs, map[string]any{"language": "cobol", "code": "x"})
	if !res.IsError || !strings.Contains(text(res), "run_code: language must be one of python, javascript, typescript, bash, sh") {
		t.Errorf("bad language: isError=%v %q", res.IsError, text(res))
	}
	res = runCode(t, cs, map[string]any{"language": "python", "code": "1", "pathId": ""})
	if !res.IsError || !strings.Contains(text(res), "pathId must be a non-empty string") {
		t.Errorf("empty pathId: isError=%v %q", res.IsError, text(res))
	}
	t.Logf("redacted output: %q", r4.Stdout)

	// A matplotlib figure arrives as image content; the text drops its base64.
	res = runCode(t, cs, map[string]any{"language": "python", "code": "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"})
	var img *sdk.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*sdk.ImageContent); ok {
			img = ic
		}
	}
	if res.IsError || img == nil || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG")) {
		t.Errorf("figure: isError=%v image=%v text=%.300s", res.IsError, img != nil, text(res))
	} else if strings.Contains(text(res), "iVBOR") {
		t.Errorf("text content still carries the base64 PNG")
	}
	return first.Identity
}

// progressMessages collects progress notifications per client session.
var progressMessages = struct {
	sync.Mutex
	m map[*sdk.ClientSession][]string
}{m: map[*sdk.ClientSession][]string{}}

func onProgress(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	progressMessages.Lock()
	defer progressMessages.Unlock()
	progressMessages.m[req.Session] = append(progressMessages.m[req.Session], req.Params.Message)
}

func clientOptions() *sdk.ClientOptions {
	return &sdk.ClientOptions{ProgressNotificationHandler: onProgress}
}

// runCodeWithProgress calls run_code with a progress token and checks that
// the streamed output arrived as progress before the result.
func runCodeWithProgress(t *testing.T, cs *sdk.ClientSession, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	progressMessages.Lock()
	delete(progressMessages.m, cs)
	progressMessages.Unlock()
	p := &sdk.CallToolParams{Name: "run_code", Arguments: args}
	p.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		progressMessages.Lock()
		got := strings.Join(progressMessages.m[cs], "")
		progressMessages.Unlock()
		if got == "tick 0\ntick 1\ntick 2\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("progress messages = %q", got)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return res
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestInMemory(t *testing.T) {
	s := newStack(t)
	srv := New(s.reg, Config{Tenant: "tenant-stdio"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, clientOptions())
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := exercise(t, s, cs, "tenant-stdio")

	// A second session is a second conversation: it does not see x.
	st2, ct2 := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st2)
	cs2, err := client.Connect(ctx, ct2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := runResult(t, runCode(t, cs2, map[string]any{"language": "python", "code": "print(x)"})); r.Success {
		t.Errorf("second session shares the first one's conversation: %+v", r)
	}
	// Unless it names the conversation.
	r := runResult(t, runCode(t, cs2, map[string]any{"language": "python", "code": "print(x)", "conversationId": id.ConversationID}))
	if !r.Success || r.Stdout != "41\n" {
		t.Errorf("naming the conversation: %+v", r)
	}
	cs.Close()
	cs2.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("server did not stop after the client closed")
	}
}

func TestNoTenant(t *testing.T) {
	s := newStack(t)
	srv := New(s.reg, Config{})
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, clientOptions()).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := runCode(t, cs, map[string]any{"language": "python", "code": "1"})
	if !res.IsError || !strings.Contains(text(res), "no tenant") {
		t.Errorf("no tenant: %v %q", res.IsError, text(res))
	}
}

// headerTransport adds the API key to every request.
type headerTransport struct{ key string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-API-Key", h.key)
	r.Header.Set(tenantHeader, "spoofed") // must be overwritten by the server
	return http.DefaultTransport.RoundTrip(r)
}

func apiKeyAuth(r *http.Request) (string, error) {
	switch r.Header.Get("X-API-Key") {
	case "key-1":
		return "tenant-http", nil
	case "key-2":
		return "tenant-other", nil
	}
	return "", errors.Join(errors.New("invalid API key"), errdefs.ErrUnauthenticated)
}

func TestStreamableHTTP(t *testing.T) {
	s := newStack(t)
	srv := New(s.reg, Config{Tenant: "must-not-be-used"})
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(apiKeyAuth))
	hs := httptest.NewServer(mux)
	defer hs.Close()

	ctx := context.Background()
	connect := func(key string) (*sdk.ClientSession, error) {
		tr := &sdk.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: &http.Client{Transport: headerTransport{key}}}
		return sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, clientOptions()).Connect(ctx, tr, nil)
	}
	cs, err := connect("key-1")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	exercise(t, s, cs, "tenant-http")
	if ev := s.lastCall(t); ev.Identity.ConversationID != cs.ID() {
		t.Errorf("conversation %q, want the MCP session id %q", ev.Identity.ConversationID, cs.ID())
	}

	// No key, or a wrong one: 401 with a JSON error, before any MCP.
	if _, err := connect("wrong"); err == nil {
		t.Error("connect with a wrong key succeeded")
	}
	resp, err := http.Post(hs.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || body["code"] != "unauthenticated" {
		t.Errorf("no key: %d %v", resp.StatusCode, body)
	}

	// A large write fits in one request (the SDK's default cap is 4 MiB).
	big := strings.Repeat("0123456789abcdef\n", 6<<20/17)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "big.txt", "content": big}})
	if err != nil || res.IsError {
		t.Fatalf("6 MiB write_file: %v %s", err, text(res))
	}

	// Behind a reverse proxy the Host is not loopback; the API key still rules.
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Host = "sandlot.example.com"
	req.Header.Set("X-API-Key", "key-1")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("proxied initialize: %d", resp.StatusCode)
	}

	// Another tenant reusing the session id runs as itself, in its own
	// context: the first tenant's state is not reachable.
	cs2, err := connect("key-2")
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	r := runResult(t, runCode(t, cs2, map[string]any{"language": "python", "code": "print(x)", "conversationId": cs.ID()}))
	if r.Success {
		t.Errorf("tenant-other reached tenant-http's conversation: %+v", r)
	}
	if ev := s.lastCall(t); ev.Identity.TenantID != "tenant-other" || ev.Identity.ConversationID != cs.ID() {
		t.Errorf("identity = %+v", ev.Identity)
	}
}

// TestToolErrorSanitized: a tool error leaves without host paths, Go
// source positions or secrets.
func TestToolErrorSanitized(t *testing.T) {
	err := fmt.Errorf("create sandbox: /run/sandlot/bundles/sb-1: exec (local.go:88) for ops@exemplar.ie: %w", errdefs.ErrFailedPrecondition)
	got := text(toolError(err))
	if strings.Contains(got, "/run/sandlot") || strings.Contains(got, "local.go") || strings.Contains(got, "ops@exemplar.ie") ||
		!strings.Contains(got, "[internal]") || !strings.Contains(got, "[REDACTED:EMAIL]") {
		t.Fatalf("tool error %q", got)
	}
}

// modeTenants is a fake Tenants: ids to guard modes; an id it lacks was
// deleted.
type modeTenants map[string]string

func (m modeTenants) Tenant(_ context.Context, id string) (*tenant.Tenant, error) {
	mode, ok := m[id]
	if !ok {
		return nil, fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	return &tenant.Tenant{ID: id, GuardMode: mode}, nil
}

// TestTenantGuardMode: a call runs with its tenant in the context, so the
// guard applies that tenant's mode (the stack's guard has no ModeFor and
// defaults to enforce); a tenant deleted under a session is refused.
func TestTenantGuardMode(t *testing.T) {
	s := newStack(t)
	ts := modeTenants{"t-off": tenant.GuardOff, "t-enforce": tenant.GuardEnforce}
	code := map[string]any{"language": "python", "code": "print('mail ' + 'alice' + '@exemplar.ie')"}
	for _, tc := range []struct {
		tenant  string
		want    string // in stdout
		wantErr string
	}{
		{"t-off", "alice@exemplar.ie", ""},
		{"t-enforce", "[REDACTED:EMAIL]", ""},
		{"t-gone", "", "no longer exists"},
	} {
		t.Run(tc.tenant, func(t *testing.T) {
			srv := New(s.reg, Config{Tenant: tc.tenant, Tenants: ts})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, ct := sdk.NewInMemoryTransports()
			go srv.Run(ctx, st)
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, clientOptions()).Connect(ctx, ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res := runCode(t, cs, code)
			if tc.wantErr != "" {
				if !res.IsError || !strings.Contains(text(res), tc.wantErr) {
					t.Fatalf("got %v %q, want an error containing %q", res.IsError, text(res), tc.wantErr)
				}
				return
			}
			if r := runResult(t, res); !strings.Contains(r.Stdout, tc.want) {
				t.Errorf("stdout %q, want it to contain %q", r.Stdout, tc.want)
			}
		})
	}
}
