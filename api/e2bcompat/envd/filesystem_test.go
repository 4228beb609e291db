package envd_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime/multipart"
	"strings"
	"testing"
)

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
		var auth []string
		if user != "" {
			auth = []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))}
		}
		resp := fsCall(e, sb, method, body, auth...)
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
