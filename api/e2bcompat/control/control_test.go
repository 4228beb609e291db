package e2bcompat_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api/e2bcompat"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		path, sid string
		want      bool
	}{
		{"/sandboxes", "", true},
		{"/sandboxes/abc/timeout", "", true},
		{"/v2/sandboxes", "", true},
		{"/v2/sandboxes/abc/connect", "", true},
		{"/process.Process/Start", "abc", true},
		{"/files", "abc", true},
		{"/files", "", false},
		{"/sandboxesX", "", false},
		{"/v1/contexts", "", false},
		{"/v3/templates", "", true},
		{"/v2/templates/t/builds/b", "", true},
		{"/templates/aliases/x", "", true},
		{"/v1/templates", "", false},
	} {
		r := httptest.NewRequest("GET", tc.path, nil)
		if tc.sid != "" {
			r.Header.Set("E2b-Sandbox-Id", tc.sid)
		}
		if got := e2bcompat.Match(r); got != tc.want {
			t.Errorf("Match(%s, sid=%q) = %v, want %v", tc.path, tc.sid, got, tc.want)
		}
	}
}

func TestControlPlane(t *testing.T) {
	e := newEnv(t)
	t.Run("auth", func(t *testing.T) {
		for _, key := range []string{"", "e2b_bad"} {
			resp := e.Do("POST", "/v2/sandboxes", strings.NewReader(`{"templateID":"base"}`), "X-API-KEY", key)
			if resp.StatusCode != 401 {
				t.Fatalf("key %q: status %d", key, resp.StatusCode)
			}
			if got := decode[apiErr](t, resp); got.Code != 401 || got.Message == "" {
				t.Fatalf("key %q: body %+v", key, got)
			}
		}
	})
	sb := e.Create(key1, `{"templateID":"code-interpreter-v1","timeout":60,"metadata":{"team":"a"}}`)
	if sb.SandboxID == "" || sb.TemplateID != "code-interpreter-v1" || sb.ClientID == "" || sb.EnvdVersion != e2bcompat.EnvdVersion || sb.EnvdAccessToken == "" {
		t.Fatalf("create answer %+v", sb)
	}
	t.Run("v1 create", func(t *testing.T) {
		resp := e.Do("POST", "/sandboxes", strings.NewReader(`{"templateID":"base","metadata":{"team":"b"}}`), "X-API-KEY", key1)
		if resp.StatusCode != 201 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("identity from metadata", func(t *testing.T) {
		a := e.Create(key1, `{"metadata":{"conversationId":"conv-x","pathId":"p1"}}`)
		b := e.Create(key1, `{"metadata":{"conversationId":"conv-x","pathId":"p1"}}`)
		if a.SandboxID != b.SandboxID {
			t.Fatalf("same identity gave two sandboxes %s %s", a.SandboxID, b.SandboxID)
		}
	})
	t.Run("info", func(t *testing.T) {
		resp := e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)
		got := decode[struct {
			SandboxID, State string
			Metadata         map[string]string
		}](t, resp)
		if got.SandboxID != sb.SandboxID || got.State != "running" || got.Metadata["team"] != "a" || got.Metadata["sandlot.e2bTemplate"] != "" {
			t.Fatalf("info %+v", got)
		}
		if resp := e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key2); resp.StatusCode != 404 {
			t.Fatalf("other tenant sees the sandbox: %d", resp.StatusCode)
		}
	})
	t.Run("list paging and metadata", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			e.Create(key1, `{"metadata":{"team":"page"}}`)
		}
		seen := map[string]bool{}
		next := ""
		for pages := 0; ; pages++ {
			q := "/v2/sandboxes?limit=2&metadata=team%3Dpage"
			if next != "" {
				q += "&nextToken=" + next
			}
			resp := e.Do("GET", q, nil, "X-API-KEY", key1)
			items := decode[[]struct{ SandboxID string }](t, resp)
			for _, it := range items {
				seen[it.SandboxID] = true
			}
			next = resp.Header.Get("X-Next-Token")
			if next == "" {
				break
			}
			if pages > 3 {
				t.Fatal("paging does not end")
			}
		}
		if len(seen) != 3 {
			t.Fatalf("listed %d sandboxes, want 3", len(seen))
		}
		resp := e.Do("GET", "/v2/sandboxes?state=paused", nil, "X-API-KEY", key1)
		if items := decode[[]any](t, resp); len(items) != 0 {
			t.Fatalf("paused list with nothing paused: %v", items)
		}
	})
	t.Run("timeout and refresh", func(t *testing.T) {
		for _, p := range []string{"/timeout", "/refreshes"} {
			resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+p, strings.NewReader(`{"timeout":120,"duration":30}`), "X-API-KEY", key1)
			if resp.StatusCode != 204 {
				t.Fatalf("%s: %d", p, resp.StatusCode)
			}
		}
	})
	t.Run("connect", func(t *testing.T) {
		resp := e.Do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{"timeout":30}`), "X-API-KEY", key1)
		if got := decode[created](t, resp); resp.StatusCode != 200 || got.EnvdAccessToken == "" || got.TrafficAccessToken == "" {
			t.Fatalf("connect %d %+v", resp.StatusCode, got)
		}
	})
	t.Run("pause and resume", func(t *testing.T) {
		pausePath := "/sandboxes/" + sb.SandboxID + "/pause"
		state := func() string {
			return decode[struct{ State string }](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)).State
		}
		listed := func(q string) bool {
			for _, it := range decode[[]struct{ SandboxID, State string }](t, e.Do("GET", "/v2/sandboxes"+q, nil, "X-API-KEY", key1)) {
				if it.SandboxID == sb.SandboxID {
					return true
				}
			}
			return false
		}
		if resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/resume", nil, "X-API-KEY", key1); resp.StatusCode != 409 {
			t.Fatalf("resume of a running sandbox: %d, want 409", resp.StatusCode)
		}
		if resp := e.Do("POST", pausePath, strings.NewReader(`{"memory":false}`), "X-API-KEY", key1); resp.StatusCode != 400 {
			t.Fatalf("pause without memory: %d, want 400 (not supported)", resp.StatusCode)
		}
		if resp := e.Do("POST", pausePath, nil, "X-API-KEY", key2); resp.StatusCode != 404 {
			t.Fatalf("another tenant's pause: %d, want 404", resp.StatusCode)
		}
		if resp := e.Do("POST", pausePath, strings.NewReader(`{"memory":true}`), "X-API-KEY", key1); resp.StatusCode != 204 {
			t.Fatalf("pause %d", resp.StatusCode)
		}
		resp := e.Do("POST", pausePath, nil, "X-API-KEY", key1)
		if got := decode[apiErr](t, resp); resp.StatusCode != 409 || got.Code != 409 || !strings.Contains(got.Message, "already paused") {
			t.Fatalf("second pause: %d %+v, want 409", resp.StatusCode, got)
		}
		if st := state(); st != "paused" {
			t.Fatalf("state %q, want paused", st)
		}
		if !listed("") || !listed("?state=paused") || listed("?state=running") || !listed("?state=running,paused") {
			t.Fatal("the state filter does not select the paused sandbox")
		}
		for _, port := range []string{"49983", "49999"} {
			if resp := e.Do("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", port, "X-Access-Token", sb.EnvdAccessToken); resp.StatusCode != 502 {
				t.Fatalf("port %s of a paused sandbox: %d, want 502", port, resp.StatusCode)
			}
		}
		if resp := e.Do("POST", "/sandboxes/"+sb.SandboxID+"/timeout", strings.NewReader(`{"timeout":60}`), "X-API-KEY", key1); resp.StatusCode != 409 {
			t.Fatalf("setTimeout of a paused sandbox: %d, want 409", resp.StatusCode)
		}
		if resp := e.Do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{"timeout":60,"memory":false}`), "X-API-KEY", key1); resp.StatusCode != 400 {
			t.Fatalf("connect with onResume reboot: %d, want 400 (not supported)", resp.StatusCode)
		}
		resp = e.Do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{"timeout":60}`), "X-API-KEY", key1)
		if got := decode[created](t, resp); resp.StatusCode != 201 || got.EnvdAccessToken == "" {
			t.Fatalf("connect to a paused sandbox: %d %+v, want 201", resp.StatusCode, got)
		}
		if st := state(); st != "running" {
			t.Fatalf("state after connect %q", st)
		}
		if resp := e.Do("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.EnvdAccessToken); resp.StatusCode != 204 {
			t.Fatalf("health after resume: %d", resp.StatusCode)
		}
		// The older resume route: 201, its own default timeout (15 s).
		e.Do("POST", pausePath, nil, "X-API-KEY", key1)
		resp = e.Do("POST", "/sandboxes/"+sb.SandboxID+"/resume", strings.NewReader(`{"autoPause":false}`), "X-API-KEY", key1)
		if resp.StatusCode != 201 {
			t.Fatalf("resume %d", resp.StatusCode)
		}
		end := decode[struct{ EndAt time.Time }](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)).EndAt
		if d := time.Until(end); d > 16*time.Second || d < 5*time.Second {
			t.Fatalf("resumed without a timeout: ends in %s, want E2B's 15 s", d)
		}
	})
	t.Run("kill twice", func(t *testing.T) {
		if resp := e.Do("DELETE", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1); resp.StatusCode != 204 {
			t.Fatalf("first kill %d", resp.StatusCode)
		}
		resp := e.Do("DELETE", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("second kill %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if got := decode[apiErr](t, resp); got.Code != 404 || got.Message == "" {
			t.Fatalf("404 body %+v", got)
		}
		// sandbox calls to a killed sandbox: the proxy's 502
		resp = e.Do("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.EnvdAccessToken)
		if resp.StatusCode != 502 {
			t.Fatalf("health of killed sandbox: %d", resp.StatusCode)
		}
		// and the code interpreter's: 404, as E2B (NotFoundError in the SDK)
		resp = e.Do("POST", "/execute", strings.NewReader(`{"code":"1"}`), e.Headers(sb, "49999")...)
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("execute on a killed sandbox: %d", resp.StatusCode)
		}
	})
}

func TestSandboxAuth(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	other := e.Create(key2, `{}`)
	for _, tc := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"token", e.Headers(sb, "49983"), 204},
		{"api key", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-API-KEY", key1}, 204},
		{"nothing", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983"}, 401},
		{"token of another sandbox", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", other.EnvdAccessToken}, 401},
		{"other tenant key", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-API-KEY", key2}, 502},
		{"unknown port", []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "8080", "X-Access-Token", sb.EnvdAccessToken}, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.Do("GET", "/health", nil, tc.hdr...)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want >= 400 {
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Fatalf("error content type %q", ct)
				}
			}
		})
	}
}

// envelope is one Connect streaming frame.
type envelope struct {
	Flag byte
	Body string
}

func ptr[T any](v T) *T { return &v }

func TestFilesystemErrors(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	unary := func(method, body, user string) (int, map[string]any, string) {
		hdr := append(e.Headers(sb, "49983"), "Content-Type", "application/json", "Connect-Protocol-Version", "1")
		if user != "" {
			hdr = append(hdr, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
		}
		resp := e.Do("POST", "/filesystem.Filesystem/"+method, strings.NewReader(body), hdr...)
		return resp.StatusCode, decode[map[string]any](t, resp), resp.Header.Get("Content-Type")
	}
	for _, tc := range []struct {
		name, method, body string
		status             int
		code               string
		user               string
	}{
		{"stat missing", "Stat", `{"path":"/nope"}`, 404, "not_found", ""},
		{"mkdir", "MakeDir", `{"path":"/home/user/d"}`, 200, "", ""},
		{"mkdir again", "MakeDir", `{"path":"/home/user/d"}`, 409, "already_exists", ""},
		{"stat dir", "Stat", `{"path":"/home/user/d"}`, 200, "", ""},
		{"list", "ListDir", `{"path":"/home/user","depth":1}`, 200, "", ""},
		{"remove missing is a no-op", "Remove", `{"path":"/home/user/zz"}`, 200, "", ""},
		{"move missing", "Move", `{"source":"/a","destination":"/b"}`, 404, "not_found", ""},
		{"as user", "Stat", `{"path":"/home/user/d"}`, 200, "", "user"},
		{"as root", "Stat", `{"path":"/home/user/d"}`, 200, "", "root"}, // the agent decides whether the sandbox has root
		{"as someone else", "Stat", `{"path":"/home/user/d"}`, 400, "invalid_argument", "bob"},
		{"watch a missing dir", "CreateWatcher", `{"path":"/home/user/nope"}`, 404, "not_found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, ct := unary(tc.method, tc.body, tc.user)
			if status != tc.status || ct != "application/json" {
				t.Fatalf("status %d (%s) body %v", status, ct, body)
			}
			if tc.code != "" && (body["code"] != tc.code || body["message"] == "") {
				t.Fatalf("error body %v", body)
			}
			if tc.name == "stat dir" {
				entry := body["entry"].(map[string]any)
				if entry["type"] != "FILE_TYPE_DIRECTORY" || entry["name"] != "d" || entry["permissions"] != "drwxr-xr-x" {
					t.Fatalf("entry %v", entry)
				}
			}
		})
	}
}

func TestFiles(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for name, content := range map[string]string{"/home/user/a/one.txt": "1", "two.bin": "\x00\x01"} {
		fw, _ := mw.CreateFormFile("file", name)
		fw.Write([]byte(content))
	}
	mw.Close()
	resp := e.Do("POST", "/files", &buf, append(e.Headers(sb, "49983"), "Content-Type", mw.FormDataContentType())...)
	if resp.StatusCode != 200 {
		t.Fatalf("upload %d", resp.StatusCode)
	}
	got := decode[[]map[string]string](t, resp)
	if len(got) != 2 {
		t.Fatalf("upload answer %v", got)
	}
	for _, f := range got {
		if f["type"] != "file" || !strings.HasPrefix(f["path"], "/home/user/") || f["name"] == "" {
			t.Fatalf("upload item %v", f)
		}
	}
	resp = e.Do("POST", "/files?path=big.bin", bytes.NewReader(bytes.Repeat([]byte("x"), 3<<20)), append(e.Headers(sb, "49983"), "Content-Type", "application/octet-stream")...)
	if resp.StatusCode != 200 {
		t.Fatalf("octet-stream upload %d", resp.StatusCode)
	}
	for p, want := range map[string]int{"/home/user/two.bin": 2, "big.bin": 3 << 20} {
		resp = e.Do("GET", "/files?path="+p, nil, e.Headers(sb, "49983")...)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || len(b) != want {
			t.Fatalf("read %s: %d, %d bytes", p, resp.StatusCode, len(b))
		}
	}
	resp = e.Do("GET", "/files?path=/missing", nil, e.Headers(sb, "49983")...)
	if resp.StatusCode != 404 || decode[apiErr](t, resp).Message == "" {
		t.Fatalf("missing file: %d", resp.StatusCode)
	}
}

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
