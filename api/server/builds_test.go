package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
	"github.com/sandlot/sandlot/templates/templatestest"
)

// entry is one tar entry of a test's build context.
type entry struct {
	name, body, link string
	typ              byte
	size             int64 // for a regular file without body: this many zeros
}

// contextTar writes entries as a tar, gzip-compressed when gz.
func contextTar(t *testing.T, gz bool, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := &buf
	var zw *gzip.Writer
	var tw *tar.Writer
	if gz {
		zw = gzip.NewWriter(w)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(w)
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Linkname: e.link}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		body := []byte(e.body)
		if e.size > 0 {
			body = make([]byte, e.size)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			h.Size = int64(len(body))
		case tar.TypeDir:
			h.Mode = 0o755
		case tar.TypeChar:
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

type buildsEnv struct {
	*env
	cat  *templates.Catalog
	imgs *image.Store
}

// newBuildsEnv is a server with a real catalog, image store, build queue
// and builder (FROM and COPY; RUN needs sandboxes: the e2e test), the
// busybox image as the public template "base" (a tenant's FROM names
// templates, never the store's images), and bounds small enough to hit:
// 1 MiB per context, 200 entries.
func newBuildsEnv(t *testing.T) *buildsEnv {
	t.Helper()
	cat, imgs := templateCatalog(t, nil) // root: unpacking keeps owners
	archive := templatestest.DockerArchive(t, templatestest.Image(t, "base"), "example.test/base:1")
	if _, err := cat.Import(context.Background(), "", archive, templates.Spec{Name: "base"}, nil); err != nil {
		t.Fatal(err)
	}
	q := builds.New(builds.Config{Builder: build.New(build.Config{Store: imgs}), Images: imgs, Catalog: cat,
		MaxUploadBytes: 1 << 20, MaxEntries: 200})
	e := newEnv(t, func(c *server.Config) { c.Templates, c.Builds = cat, q })
	return &buildsEnv{env: e, cat: cat, imgs: imgs}
}

// post sends a build context.
func (e *buildsEnv) post(t *testing.T, key, query string, body []byte, header map[string]string) (int, api.TemplateBuild, string) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/x-tar"}
	for k, v := range header {
		h[k] = v
	}
	w := e.do(t, req{method: "POST", path: "/v1/templates/builds?" + query, key: key, body: body, header: h})
	var b api.TemplateBuild
	if w.Code == 202 {
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
			t.Fatalf("%v: %s", err, w.Body)
		}
	}
	return w.Code, b, w.Body.String()
}

// wait polls a build until it ends, gathering its log.
func (e *buildsEnv) wait(t *testing.T, key, id string) api.TemplateBuild {
	t.Helper()
	var all []api.TemplateBuildLog
	next := 0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		w := e.do(t, req{method: "GET", path: "/v1/templates/builds/" + id + "?logsOffset=" + itoa(next), key: key})
		if w.Code != 200 {
			t.Fatalf("status: %d %s", w.Code, w.Body)
		}
		var b api.TemplateBuild
		json.Unmarshal(w.Body.Bytes(), &b)
		all = append(all, b.Logs...)
		next = b.LogsNext
		if b.Status == api.BuildReady || b.Status == api.BuildError {
			b.Logs = all
			return b
		}
	}
	t.Fatal("build did not end")
	return api.TemplateBuild{}
}

func itoa(n int) string { return strconv.Itoa(n) }

// stagingLeft lists the build directories left in the store's tmp/.
func (e *buildsEnv) stagingLeft(t *testing.T) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(e.imgs.Root(), "tmp", "build-*"))
	return m
}

// TestTemplateBuildWalls attacks POST /v1/templates/builds with hostile
// contexts and bad requests: each is a clear 4xx, nothing lands outside
// the staging directory, and a refused build leaves no staging behind.
// Unknown and other tenants' build ids are 404.
func TestTemplateBuildWalls(t *testing.T) {
	e := newBuildsEnv(t)
	outside := "/tmp/sandlot-build-escape-" + filepath.Base(t.TempDir())
	t.Cleanup(func() { os.Remove(outside) })
	dockerfile := entry{name: "Dockerfile", body: "FROM base\nCOPY . /ctx/\n"}
	deep := strings.Repeat("../", 12) + strings.TrimPrefix(outside, "/")
	var many []entry
	for i := range 201 {
		many = append(many, entry{name: "d" + itoa(i) + "/", typ: tar.TypeDir})
	}
	for _, tc := range []struct {
		name   string
		query  string
		body   []byte
		header map[string]string
		status int
	}{
		{"dot-dot escape", "name=x", contextTar(t, false, dockerfile, entry{name: deep, body: "x"}), nil, 400},
		{"dot-dot hardlink", "name=x", contextTar(t, false, dockerfile, entry{name: "h", typ: tar.TypeLink, link: "../../../../etc/passwd"}), nil, 400},
		{"absolute path", "name=x", contextTar(t, false, dockerfile, entry{name: outside, body: "x"}), nil, 400},
		{"write through a symlink out", "name=x", contextTar(t, false, dockerfile, entry{name: "evil", typ: tar.TypeSymlink, link: filepath.Dir(outside)},
			entry{name: "evil/" + filepath.Base(outside), body: "x"}), nil, 400},
		{"COPY through a symlink out", "name=x", contextTar(t, false, entry{name: "Dockerfile", body: "FROM base\nCOPY evil/passwd /stolen\n"},
			entry{name: "evil", typ: tar.TypeSymlink, link: "/etc"}), nil, 400},
		{"Dockerfile a symlink out", "name=x", contextTar(t, false, entry{name: "Dockerfile", typ: tar.TypeSymlink, link: "/etc/passwd"}), nil, 400},
		{"device node", "name=x", contextTar(t, false, dockerfile, entry{name: "null", typ: tar.TypeChar}), nil, 400},
		{"whiteout name", "name=x", contextTar(t, false, dockerfile, entry{name: ".wh.secret", body: ""}), nil, 400},
		{"gzip bomb", "name=x", contextTar(t, true, dockerfile, entry{name: "zeros", size: 4 << 20}), nil, 413},
		{"too many entries", "name=x", contextTar(t, true, append([]entry{dockerfile}, many...)...), nil, 413},
		{"oversized body", "name=x", bytes.Repeat([]byte{0}, 2<<20), nil, 413},
		{"malformed tar", "name=x", []byte("this is not a tar archive, not at all, though long enough to read a header from it" + strings.Repeat(".", 600)), nil, 400},
		{"truncated gzip", "name=x", contextTar(t, true, dockerfile)[:20], nil, 400},
		{"no Dockerfile", "name=x", contextTar(t, false, entry{name: "a.txt", body: "a"}), nil, 400},
		{"dockerfile out of the context", "name=x&dockerfile=../Dockerfile", contextTar(t, false, dockerfile), nil, 400},
		{"bad Dockerfile", "name=x", contextTar(t, false, entry{name: "Dockerfile", body: "FROM base\nADD x /x\n"}), nil, 400},
		{"bad name", "name=../x", contextTar(t, false, dockerfile), nil, 400},
		{"built-in name", "name=default", contextTar(t, false, dockerfile), nil, 409},
		{"bad buildArg", "name=x&buildArg=NOEQUALS", contextTar(t, false, dockerfile), nil, 400},
		{"malformed settings", "name=x&settings=%7B", contextTar(t, false, dockerfile), nil, 400},
		{"bad content type", "name=x", []byte("x"), map[string]string{"Content-Type": "text/plain"}, 400},
		{"other content encoding", "name=x", contextTar(t, false, dockerfile), map[string]string{"Content-Encoding": "br"}, 415},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := e.post(t, e.KeyA, tc.query, tc.body, tc.header)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %s", code, tc.status, body)
			}
			if !strings.Contains(body, `"code"`) {
				t.Errorf("error body %s", body)
			}
			if _, err := os.Lstat(outside); err == nil {
				t.Fatalf("the context wrote %s", outside)
			}
			if left := e.stagingLeft(t); len(left) != 0 {
				t.Errorf("staging left behind: %v", left)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		body   string
		status int
	}{
		{"malformed JSON", `{"name": `, 400},
		{"unknown field", `{"name":"x","dockerfile":"FROM base","evil":1}`, 400},
		{"no dockerfile", `{"name":"x"}`, 400},
		{"bad JSON Dockerfile", `{"name":"x","dockerfile":"RUN true"}`, 400},
		{"COPY without a context", `{"name":"x","dockerfile":"FROM base\nCOPY a /a\n"}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.do(t, req{method: "POST", path: "/v1/templates/builds", key: e.KeyA, body: tc.body})
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
		})
	}
	code, b, body := e.post(t, e.KeyA, "name=mine", contextTar(t, false, dockerfile), nil)
	if code != 202 {
		t.Fatalf("build: %d %s", code, body)
	}
	for _, tc := range []struct {
		name, path, key string
		status          int
	}{
		{"unknown build", "/v1/templates/builds/nope", e.KeyA, 404},
		{"another tenant's build", "/v1/templates/builds/" + b.BuildID, e.KeyB, 404},
		{"bad offset", "/v1/templates/builds/" + b.BuildID + "?logsOffset=-1", e.KeyA, 400},
		{"no key", "/v1/templates/builds/" + b.BuildID, "", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := e.do(t, req{method: "GET", path: tc.path, key: tc.key}); w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
		})
	}
	e.wait(t, e.KeyA, b.BuildID)
}

// TestTemplateBuildContext builds from a gzip context (Content-Encoding
// gzip) with a Dockerfile elsewhere in it, a build arg and settings: the
// tenant's template holds the COPYed files, a symlink out of the context
// is copied as a symlink (never followed), the settings are the record's;
// another tenant sees neither the build nor the template.
func TestTemplateBuildContext(t *testing.T) {
	e := newBuildsEnv(t)
	ctxTar := contextTar(t, true,
		entry{name: "build/app.Dockerfile", body: "FROM base\nARG DEST=/wrong\nCOPY app/ ${DEST}/\nCOPY link /opt/link\nWORKDIR /srv\n"},
		entry{name: "app/", typ: tar.TypeDir},
		entry{name: "app/main.py", body: "print('hi')\n"},
		entry{name: "link", typ: tar.TypeSymlink, link: "/etc/shadow"})
	q := "name=app:v1&dockerfile=build/app.Dockerfile&buildArg=DEST=/opt/app&settings=" + url.QueryEscape(`{"env":{"X":"1"}}`)
	code, b, body := e.post(t, e.KeyA, q, ctxTar, map[string]string{"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"})
	if code != 202 || b.Status != api.BuildWaiting || b.Name != "app:v1" || b.BuildID == "" {
		t.Fatalf("build: %d %s", code, body)
	}
	done := e.wait(t, e.KeyA, b.BuildID)
	if done.Status != api.BuildReady || done.Template == nil {
		t.Fatalf("build ended %+v", done)
	}
	var logs []string
	for _, l := range done.Logs {
		logs = append(logs, l.Message)
	}
	if joined := strings.Join(logs, "\n"); !strings.Contains(joined, "COPY app/") {
		t.Errorf("log %q lacks the steps", joined)
	}
	tpl := done.Template
	if tpl.Name != "app:v1" || tpl.Settings.Env["X"] != "1" || tpl.Settings.Workdir != "/srv" || tpl.Public {
		t.Errorf("template %+v", tpl)
	}
	img, err := e.imgs.Get(context.Background(), tpl.Image)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(p string) (os.FileInfo, string) {
		for _, dir := range img.LowerDirs() {
			if fi, err := os.Lstat(filepath.Join(dir, p)); err == nil {
				b, _ := os.ReadFile(filepath.Join(dir, p))
				if fi.Mode()&os.ModeSymlink != 0 {
					l, _ := os.Readlink(filepath.Join(dir, p))
					return fi, l
				}
				return fi, string(b)
			}
		}
		return nil, ""
	}
	if _, body := lookup("opt/app/main.py"); body != "print('hi')\n" {
		t.Errorf("opt/app/main.py: %q", body)
	}
	if fi, target := lookup("opt/link"); fi == nil || fi.Mode()&os.ModeSymlink == 0 || target != "/etc/shadow" {
		t.Errorf("opt/link: %v %q, want the symlink itself", fi, target)
	}
	for _, tc := range []struct {
		name, path, key string
		status          int
	}{
		{"owner gets it", "/v1/templates/app:v1", e.KeyA, 200},
		{"other tenant by name", "/v1/templates/app:v1", e.KeyB, 404},
		{"other tenant by id", "/v1/templates/" + tpl.ID, e.KeyB, 404},
		{"other tenant's status", "/v1/templates/builds/" + b.BuildID, e.KeyB, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := e.do(t, req{method: "GET", path: tc.path, key: tc.key}); w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
		})
	}
	if left := e.stagingLeft(t); len(left) != 0 {
		t.Errorf("staging left after the build: %v", left)
	}

	// A Dockerfile alone (JSON): FROM the tenant's own template.
	w := e.do(t, req{method: "POST", path: "/v1/templates/builds", key: e.KeyA,
		body: api.TemplateBuildRequest{Name: "derived", Dockerfile: "FROM app:v1\nENV Y=2\n"}})
	if w.Code != 202 {
		t.Fatalf("JSON build: %d %s", w.Code, w.Body)
	}
	var jb api.TemplateBuild
	json.Unmarshal(w.Body.Bytes(), &jb)
	if d := e.wait(t, e.KeyA, jb.BuildID); d.Status != api.BuildReady {
		t.Fatalf("JSON build ended %+v", d)
	}
	// B's FROM app:v1 does not resolve to A's template: 404 at once.
	w = e.do(t, req{method: "POST", path: "/v1/templates/builds", key: e.KeyB,
		body: api.TemplateBuildRequest{Name: "steal", Dockerfile: "FROM app:v1\n"}})
	if w.Code != 404 || !strings.Contains(w.Body.String(), "app") {
		t.Fatalf("B's build FROM A's template: %d %s", w.Code, w.Body)
	}
}
