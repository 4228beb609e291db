package envd_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUploadAllOrNothing: the files of one multipart upload are written
// all or none. A part that cannot be written (its path is a directory),
// or a body that breaks off, fails the request with a 4xx and leaves none
// of the request's files: not the new ones written before it, not the new
// content of a file it replaced (the old one stays), and no staging file.
// Before, the parts before the failing one stayed written.
func TestUploadAllOrNothing(t *testing.T) {
	type part struct{ path, content string }
	for _, tc := range []struct {
		name   string
		parts  []part
		cut    bool // the body breaks off after the parts
		status int
	}{
		{"last part is a directory", []part{{"/home/user/new1.txt", "one"}, {"/home/user/keep.txt", "new"}, {"/home/user/d", "x"}}, false, 400},
		{"body breaks off", []part{{"/home/user/new1.txt", "one"}, {"/home/user/keep.txt", "new"}}, true, 400},
		{"first part is a directory", []part{{"/home/user/d", "x"}, {"/home/user/new1.txt", "one"}}, false, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			sb := e.Create(key1, `{}`)
			hdr := e.Headers(sb, "49983")
			put := func(p, content string) {
				t.Helper()
				resp := e.Do("POST", "/files?path="+p, strings.NewReader(content), append(hdr, "Content-Type", "application/octet-stream")...)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("write %s: %d", p, resp.StatusCode)
				}
			}
			put("/home/user/keep.txt", "old")
			put("/home/user/d/inside.txt", "in") // makes /home/user/d a directory
			before := listHome(t, e, hdr)

			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			for _, p := range tc.parts {
				fw, _ := mw.CreateFormFile("file", p.path)
				fw.Write([]byte(p.content))
			}
			body := buf.Bytes()
			if tc.cut {
				fw, _ := mw.CreateFormFile("file", "/home/user/last.txt")
				fw.Write([]byte("cut off here"))
				body = buf.Bytes() // no closing boundary
			} else {
				mw.Close()
				body = buf.Bytes()
			}
			resp := e.Do("POST", "/files", bytes.NewReader(body), append(hdr, "Content-Type", mw.FormDataContentType())...)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("upload: %d %s, want %d", resp.StatusCode, b, tc.status)
			}
			if got := read(t, e, hdr, "/home/user/new1.txt"); got != "" {
				t.Errorf("new1.txt was left written: %q", got)
			}
			if got := read(t, e, hdr, "/home/user/keep.txt"); got != "old" {
				t.Errorf("keep.txt = %q, want the old content", got)
			}
			if d := cmp.Diff(before, listHome(t, e, hdr)); d != "" {
				t.Errorf("/home/user after the failed upload (-before +after):\n%s", d)
			}
		})
	}
	t.Run("success replaces and adds", func(t *testing.T) {
		e := newEnv(t)
		sb := e.Create(key1, `{}`)
		hdr := e.Headers(sb, "49983")
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, p := range []part{{"/home/user/a.txt", "a1"}, {"/home/user/sub/b.txt", "b"}, {"/home/user/a.txt", "a2"}} {
			fw, _ := mw.CreateFormFile("file", p.path)
			fw.Write([]byte(p.content))
		}
		mw.Close()
		resp := e.Do("POST", "/files", &buf, append(hdr, "Content-Type", mw.FormDataContentType())...)
		got := decode[[]map[string]string](t, resp)
		if resp.StatusCode != 200 || len(got) != 3 || got[0]["path"] != "/home/user/a.txt" || got[1]["path"] != "/home/user/sub/b.txt" || got[1]["name"] != "b.txt" {
			t.Fatalf("upload %d: %v", resp.StatusCode, got)
		}
		if a, b := read(t, e, hdr, "/home/user/a.txt"), read(t, e, hdr, "/home/user/sub/b.txt"); a != "a2" || b != "b" {
			t.Errorf("a.txt %q (want the last part's a2), b.txt %q", a, b)
		}
		if d := cmp.Diff([]string{"a.txt", "sub"}, listHome(t, e, hdr)); d != "" {
			t.Errorf("/home/user (-want +got), no staging file left:\n%s", d)
		}
	})
}

// read returns a file's content, "" when it is missing.
func read(t *testing.T, e *env, hdr []string, p string) string {
	t.Helper()
	resp := e.Do("GET", "/files?path="+p, nil, hdr...)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return ""
	}
	if resp.StatusCode != 200 {
		t.Fatalf("read %s: %d %s", p, resp.StatusCode, b)
	}
	return string(b)
}

// listHome returns the names in /home/user.
func listHome(t *testing.T, e *env, hdr []string) []string {
	t.Helper()
	resp := e.Do("POST", "/filesystem.Filesystem/ListDir", strings.NewReader(`{"path":"/home/user","depth":1}`),
		append(hdr, "Content-Type", "application/json", "Connect-Protocol-Version", "1")...)
	body := decode[struct {
		Entries []struct{ Name string } `json:"entries"`
	}](t, resp)
	var names []string
	for _, en := range body.Entries {
		names = append(names, en.Name)
	}
	return names
}
