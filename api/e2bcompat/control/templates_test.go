package control_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
	"github.com/sandlot/sandlot/tenant"
)

// fakeBuilder stores a one-layer image under the build's name with its
// labels, and remembers what the build's context dir held.
type fakeBuilder struct {
	t  *testing.T
	s  *image.Store
	mu sync.Mutex
	// files are the context dir's entries (relative paths) at Build.
	files []string
	fail  error
	// from is the digest the build's FROM resolved to through
	// Options.Resolve (the tenant's templates); "" when it did not.
	from string
}

func (f *fakeBuilder) Build(ctx context.Context, rec *recipe.Recipe, opt build.Options) (build.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	filepath.Walk(opt.ContextDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && p != opt.ContextDir {
			rel, _ := filepath.Rel(opt.ContextDir, p)
			f.files = append(f.files, rel)
		}
		return nil
	})
	io.WriteString(opt.Output, "step output sk-SECRET\n")
	if f.fail != nil {
		return build.Result{}, f.fail
	}
	f.from = ""
	if opt.Resolve != nil {
		if base, err := opt.Resolve(ctx, rec.Steps[0].Image); err == nil {
			f.from = base.Digest.String()
		}
	}
	img := imagetest.Image(f.t, imagetest.Layer(f.t, imagetest.File{Name: "x", Body: rec.Steps[0].Image + time.Now().String()}))
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Config.User, cf.Config.WorkingDir = "user", "/srv/app"
	stored, err := f.s.Put(ctx, imageWithConfig(f.t, img, cf), image.PutOptions{Name: opt.Name})
	return build.Result{Image: stored, StartCmd: rec.StartCmd, ReadyCmd: rec.ReadyCmd}, err
}

type buildEnv struct {
	*env
	b   *fakeBuilder
	s   *image.Store
	cat *templates.Catalog
}

func newBuildEnv(t *testing.T) *buildEnv {
	t.Helper()
	testenv.RequireRoot(t) // layer.Apply keeps owners
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBuilder{t: t, s: s}
	st := memory.New()
	for _, id := range tenants {
		if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("k-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	cat := templates.New(templates.Config{Store: st, Images: s})
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{Catalog: cat,
		Builds: builds.New(builds.Config{Builder: fb, Images: s, Catalog: cat, MaxUploadBytes: 1 << 20,
			Guard: func(ctx context.Context, tenantID, s string) string {
				return strings.ReplaceAll(s, "sk-SECRET", "[REDACTED]")
			}})}})
	return &buildEnv{env: e, b: fb, s: s, cat: cat}
}

func (e *buildEnv) request(key, name string) (templateID, buildID string) {
	e.T.Helper()
	resp := e.Do("POST", "/v3/templates", strings.NewReader(`{"name":"`+name+`"}`), "X-API-KEY", key)
	if resp.StatusCode != 202 {
		b, _ := io.ReadAll(resp.Body)
		e.T.Fatalf("request build %s: %d %s", name, resp.StatusCode, b)
	}
	v := decode[struct{ TemplateID, BuildID string }](e.T, resp)
	return v.TemplateID, v.BuildID
}

type buildStatus struct {
	Status     string
	LogEntries []struct{ Message string }
	Reason     *struct{ Message string }
}

func (e *buildEnv) wait(key, tid, bid string) buildStatus {
	e.T.Helper()
	var all buildStatus
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp := e.Do("GET", "/templates/"+tid+"/builds/"+bid+"/status?logsOffset="+itoa(int64(len(all.LogEntries))), nil, "X-API-KEY", key)
		if resp.StatusCode != 200 {
			e.T.Fatalf("status: %d", resp.StatusCode)
		}
		st := decode[buildStatus](e.T, resp)
		all.LogEntries = append(all.LogEntries, st.LogEntries...)
		all.Status, all.Reason = st.Status, st.Reason
		if st.Status == "ready" || st.Status == "error" {
			return all
		}
	}
	e.T.Fatal("build did not end")
	return all
}

var errFailed = fmt.Errorf("build: line 2: RUN false: exit code 3: %w", errdefs.ErrFailedPrecondition)

func imageWithConfig(t *testing.T, img v1.Image, cf *v1.ConfigFile) v1.Image {
	out, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tarOf(t *testing.T, gz bool, hdrs ...tar.Header) []byte {
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, h := range hdrs {
		h := h
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = "content of " + h.Name
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

// zeroTar is a gzip tar of one file of n zero bytes.
func zeroTar(t *testing.T, n int) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(n)})
	tw.Write(make([]byte, n))
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// TestTemplateBuildLimit: a tenant's unfinished builds are bounded; the
// next request is resource_exhausted, other tenants are not affected.
func TestTemplateBuildLimit(t *testing.T) {
	e := newBuildEnv(t)
	for i := range 8 {
		e.request(key1, "t"+itoa(int64(i)))
	}
	if r := e.Do("POST", "/v3/templates", strings.NewReader(`{"name":"one-more"}`), "X-API-KEY", key1); r.StatusCode != 429 {
		t.Errorf("9th unfinished build: %d, want 429", r.StatusCode)
	}
	e.request(key2, "other")
}

const hash1 = "1111111111111111111111111111111111111111111111111111111111111111"

// TestTemplateBuildRoutes: the E2B build flow (request, upload link, PUT,
// start, status with logs, alias) and its walls: an upload link works once
// and only with its token; an uploaded tar cannot write outside the
// build's directory; another tenant sees neither the build nor the
// template, and cannot take its name; reserved names are refused; build
// output leaves through the guard; a failed build reports its reason.
func TestTemplateBuildRoutes(t *testing.T) {
	e := newBuildEnv(t)
	tid, bid := e.request(key1, "my-tpl")
	if len(tid) != 20 || tid == "my-tpl" {
		t.Fatalf("templateID %q, want a new template id", tid)
	}
	link := decode[struct {
		Present bool
		URL     string
	}](t, e.Do("GET", "/templates/"+tid+"/files/"+hash1, nil, "X-API-KEY", key1))
	if link.Present || !strings.Contains(link.URL, "token=") {
		t.Fatalf("upload link %+v", link)
	}
	if r := e.Do("GET", "/templates/"+tid+"/files/"+hash1, nil, "X-API-KEY", key2); r.StatusCode != 404 {
		t.Errorf("another tenant's upload link: %d, want 404", r.StatusCode)
	}
	outside := "/sandlot-upload-escape-" + filepath.Base(t.TempDir())
	hdrs := []tar.Header{
		{Name: "app/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "app/main.py", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "evil", Typeflag: tar.TypeSymlink, Linkname: "/"},
		{Name: "evil/" + filepath.Base(outside), Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "../" + filepath.Base(outside), Typeflag: tar.TypeReg, Mode: 0o644},
	}
	body := tarOf(t, true, hdrs...)
	put := func(url string, b []byte) int {
		req, _ := http.NewRequest("PUT", url, bytes.NewReader(b))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put(strings.Replace(link.URL, "token=", "token=x", 1), body); code != 403 {
		t.Errorf("upload with a wrong token: %d, want 403", code)
	}
	if code := put(link.URL, body); code != 400 {
		t.Errorf("upload of a tar with a '..' entry: %d, want 400", code)
	}
	if _, err := os.Lstat(outside); err == nil {
		os.Remove(outside)
		t.Errorf("the uploaded tar wrote %s outside the build", outside)
	}
	if code := put(link.URL, body); code != 403 {
		t.Errorf("second use of an upload link: %d, want 403", code)
	}
	// Through a symlink to "/", without '..': lands inside the build.
	link = decode[struct {
		Present bool
		URL     string
	}](t, e.Do("GET", "/templates/"+tid+"/files/"+hash1, nil, "X-API-KEY", key1))
	if code := put(link.URL, body[:0]); code != 200 {
		t.Errorf("empty upload: %d", code)
	}
	link = decode[struct {
		Present bool
		URL     string
	}](t, e.Do("GET", "/templates/"+tid+"/files/"+hash1, nil, "X-API-KEY", key1))
	if code := put(link.URL, tarOf(t, true, hdrs[:4]...)); code != 200 {
		t.Fatalf("upload: %d", code)
	}
	if _, err := os.Lstat(outside); err == nil {
		os.Remove(outside)
		t.Errorf("the uploaded tar wrote %s outside the build", outside)
	}
	tmpl := `{"fromImage":"base-img","startCmd":"python3 -m http.server","readyCmd":"curl -s localhost:8000","steps":[{"type":"COPY","args":["app","/app","",""],"filesHash":"` + hash1 + `"}]}`
	if r := e.Do("POST", "/v2/templates/"+tid+"/builds/"+bid, strings.NewReader(tmpl), "X-API-KEY", key2); r.StatusCode != 404 {
		t.Errorf("another tenant starts the build: %d, want 404", r.StatusCode)
	}
	if r := e.Do("POST", "/v2/templates/"+tid+"/builds/"+bid, strings.NewReader(`{"steps":[`), "X-API-KEY", key1); r.StatusCode != 400 {
		t.Errorf("malformed template body: %d, want 400", r.StatusCode)
	}
	if r := e.Do("POST", "/v2/templates/"+tid+"/builds/"+bid, strings.NewReader(tmpl), "X-API-KEY", key1); r.StatusCode != 202 {
		t.Fatalf("start build: %d", r.StatusCode)
	}
	st := e.wait(key1, tid, bid)
	if st.Status != "ready" {
		t.Fatalf("build status %+v", st)
	}
	var logs []string
	for _, l := range st.LogEntries {
		logs = append(logs, l.Message)
	}
	if joined := strings.Join(logs, "\n"); !strings.Contains(joined, "step output [REDACTED]") || strings.Contains(joined, "sk-SECRET") {
		t.Errorf("build logs not guarded: %q", joined)
	}
	if got := strings.Join(e.b.files, ","); !strings.Contains(got, "app/main.py") {
		t.Errorf("build context %q lacks the upload", got)
	}
	if r := e.Do("POST", "/v2/templates/"+tid+"/builds/"+bid, strings.NewReader(tmpl), "X-API-KEY", key1); r.StatusCode != 409 {
		t.Errorf("starting a build twice: %d, want 409", r.StatusCode)
	}

	// The build is a record of the tenant, with the image's user and
	// workdir and the recipe's start and ready commands; the image has no
	// name in the store.
	rec, err := e.cat.Resolve(context.Background(), "tenant-1", "my-tpl")
	if err != nil || rec.ID != tid || rec.TenantID != "tenant-1" || rec.Source != "e2b build" {
		t.Fatalf("record %+v: %v", rec, err)
	}
	want := templates.Settings{User: "user", Workdir: "/srv/app", StartCmd: "python3 -m http.server", ReadyCmd: "curl -s localhost:8000"}
	if diff := cmp.Diff(want, rec.Settings); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if _, err := e.s.Get(context.Background(), "my-tpl"); err == nil {
		t.Errorf("the built image is named in the store")
	}

	// Alias: the owner sees it, another tenant does not; another tenant's
	// build of the same name is a template of its own.
	if r := e.Do("GET", "/templates/aliases/my-tpl", nil, "X-API-KEY", key1); r.StatusCode != 200 {
		t.Errorf("alias for the owner: %d", r.StatusCode)
	} else if a := decode[struct{ TemplateID string }](t, r); a.TemplateID != tid {
		t.Errorf("alias answers %q, want %q", a.TemplateID, tid)
	}
	if r := e.Do("GET", "/templates/aliases/my-tpl", nil, "X-API-KEY", key2); r.StatusCode != 404 {
		t.Errorf("alias for another tenant: %d, want 404", r.StatusCode)
	}
	tid2, bidB := e.request(key2, "my-tpl")
	e.Do("POST", "/v2/templates/"+tid2+"/builds/"+bidB, strings.NewReader(`{"fromImage":"my-tpl","steps":[]}`), "X-API-KEY", key2)
	if st := e.wait(key2, tid2, bidB); st.Status != "ready" {
		t.Fatalf("tenant 2's build: %+v", st)
	}
	if e.b.from != "" {
		t.Errorf("tenant 2's FROM my-tpl resolved to tenant 1's template (%s)", e.b.from)
	}
	if b, _ := e.cat.Resolve(context.Background(), "tenant-2", "my-tpl"); b.ID != tid2 {
		t.Errorf("tenant 2's my-tpl is %q, want its own %q", b.ID, tid2)
	}
	if a, _ := e.cat.Resolve(context.Background(), "tenant-1", "my-tpl"); a.ID != tid {
		t.Errorf("tenant 1's my-tpl changed to %q", a.ID)
	}
	for _, name := range []string{"base", "default", "host", "../x", "UPPER", "", "a.b"} {
		if r := e.Do("POST", "/v3/templates", strings.NewReader(`{"name":"`+name+`"}`), "X-API-KEY", key1); r.StatusCode != 400 {
			t.Errorf("name %q: %d, want 400", name, r.StatusCode)
		}
	}

	// An upload past MaxUploadBytes once unpacked (a small gzip of
	// zeros) is refused, and so is a tar that is not one.
	tid3, bid3 := e.request(key1, "big")
	for _, body := range [][]byte{zeroTar(t, 2<<20), []byte("not a tar at all, not even close to one")} {
		l := decode[struct{ URL string }](t, e.Do("GET", "/templates/"+tid3+"/files/"+hash1, nil, "X-API-KEY", key1))
		if code := put(l.URL, body); code < 400 || code >= 500 {
			t.Errorf("bad upload (%d bytes): %d, want 4xx", len(body), code)
		}
	}
	_ = bid3

	// A rebuild from the tenant's own template resolves FROM to it, and
	// replaces the record (a new id) once it succeeded.
	tid4, bid4 := e.request(key1, "my-tpl")
	e.Do("POST", "/v2/templates/"+tid4+"/builds/"+bid4, strings.NewReader(`{"fromTemplate":"my-tpl","steps":[]}`), "X-API-KEY", key1)
	if st := e.wait(key1, tid4, bid4); st.Status != "ready" {
		t.Fatalf("rebuild: %+v", st)
	}
	if e.b.from != rec.Image {
		t.Errorf("FROM my-tpl resolved to %q, want the tenant's template's image %s", e.b.from, rec.Image)
	}
	if a, _ := e.cat.Resolve(context.Background(), "tenant-1", "my-tpl"); a.ID != tid4 {
		t.Errorf("after the rebuild my-tpl is %q, want %q", a.ID, tid4)
	}

	// A failing build reports why, and leaves the template as it was.
	e.b.fail = errFailed
	tid5, bid2 := e.request(key1, "my-tpl")
	e.Do("POST", "/v2/templates/"+tid5+"/builds/"+bid2, strings.NewReader(`{"fromImage":"base-img","steps":[]}`), "X-API-KEY", key1)
	if st := e.wait(key1, tid5, bid2); st.Status != "error" || st.Reason == nil || !strings.Contains(st.Reason.Message, "exit code 3") {
		t.Errorf("failed build status %+v", st)
	}
	if a, _ := e.cat.Resolve(context.Background(), "tenant-1", "my-tpl"); a.ID != tid4 {
		t.Errorf("after a failed build my-tpl is %q, want %q", a.ID, tid4)
	}
}
