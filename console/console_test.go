package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/console/bundle"
)

// TestDistCurrent: dist/ is what bundle.Build makes of web/ now (run `go
// generate ./console` after changing web/).
func TestDistCurrent(t *testing.T) {
	want, err := bundle.Build("web")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	entries, err := fs.ReadDir(dist, "dist")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, _ := fs.ReadFile(dist, "dist/"+e.Name())
		got[e.Name()] = string(b)
	}
	wantS := map[string]string{}
	for k, v := range want {
		wantS[k] = string(v)
	}
	if d := cmp.Diff(keys(wantS), keys(got)); d != "" {
		t.Fatalf("dist/ is stale; run go generate ./console (files -built +dist):\n%s", d)
	}
	for k := range wantS {
		if wantS[k] != got[k] {
			t.Errorf("dist/%s is stale; run go generate ./console", k)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func chunkName(t *testing.T) string {
	t.Helper()
	entries, _ := fs.ReadDir(dist, "dist")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "chunk-") {
			return e.Name()
		}
	}
	t.Fatal("no chunk in dist/: the terminal is not split out")
	return ""
}

// TestServe: the page and its assets answer with their types and the
// strict CSP; anything else under /ui is a 404 that carries the CSP too;
// only GET and HEAD.
func TestServe(t *testing.T) {
	h := New()
	chunk := chunkName(t)
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
		cache        string
	}{
		{"GET", "/ui", 200, "text/html; charset=utf-8", "no-cache"},
		{"GET", "/ui/", 200, "text/html; charset=utf-8", "no-cache"},
		{"HEAD", "/ui/", 200, "text/html; charset=utf-8", "no-cache"},
		{"GET", "/ui/main.js", 200, "text/javascript; charset=utf-8", "no-cache"},
		{"GET", "/ui/main.css", 200, "text/css; charset=utf-8", "no-cache"},
		{"GET", "/ui/" + chunk, 200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"},
		{"GET", "/ui/nothing.js", 404, "", ""},
		{"GET", "/ui/../console.go", 404, "", ""},
		{"GET", "/ui/dist/main.js", 404, "", ""},
		{"POST", "/ui/", 405, "", ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://sandlot.test"+tc.path, nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			hdr := w.Header()
			if hdr.Get("Content-Security-Policy") != CSP || hdr.Get("X-Content-Type-Options") != "nosniff" || hdr.Get("X-Frame-Options") != "DENY" {
				t.Errorf("headers %v", hdr)
			}
			if tc.ctype != "" && hdr.Get("Content-Type") != tc.ctype {
				t.Errorf("Content-Type %q, want %q", hdr.Get("Content-Type"), tc.ctype)
			}
			if tc.cache != "" && hdr.Get("Cache-Control") != tc.cache {
				t.Errorf("Cache-Control %q, want %q", hdr.Get("Cache-Control"), tc.cache)
			}
		})
	}
}

// TestCSPStrict: the policy allows script and style from the origin only
// (no inline, no eval, no other host), images also as data: and blob:
// URLs, and no framing.
func TestCSPStrict(t *testing.T) {
	dirs := map[string]string{}
	for _, d := range strings.Split(CSP, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		dirs[name] = value
	}
	want := map[string]string{
		"default-src": "'none'", "script-src": "'self'", "style-src": "'self'", "connect-src": "'self'",
		"img-src": "'self' data: blob:", "frame-ancestors": "'none'", "base-uri": "'none'", "form-action": "'none'",
	}
	for k, v := range want {
		if dirs[k] != v {
			t.Errorf("%s is %q, want %q", k, dirs[k], v)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
		if strings.Contains(CSP, bad) {
			t.Errorf("the CSP allows %s: %s", bad, CSP)
		}
	}
}

// TestPageWithoutKey: the page a browser gets with no key is the sign-in
// form (a textbox "API key", a button "Sign in"), and it has no inline
// script, no inline style and no external asset, which the CSP would
// refuse anyway.
func TestPageWithoutKey(t *testing.T) {
	w := httptest.NewRecorder()
	New().ServeHTTP(w, httptest.NewRequest("GET", "/ui", nil))
	page := w.Body.String()
	for _, want := range []string{`<label for="apikey">API key</label>`, `<input id="apikey"`, `<button type="submit">Sign in</button>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	for _, re := range []string{`<script(?:\s[^>]*)?>\s*[^<\s]`, `<style`, `\sstyle=`, `\son[a-z]+=`, `(?:src|href)="(?:https?:)?//`} {
		if m := regexp.MustCompile(re).FindString(page); m != "" {
			t.Errorf("the page has %q (%s)", m, re)
		}
	}
	for _, name := range []string{"main.js", chunkName(t)} {
		b, _ := fs.ReadFile(dist, "dist/"+name)
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s uses %s: markup from strings", name, bad)
			}
		}
	}
}

// TestGzipAndBudget: a client that takes gzip gets it, and the first
// load stays under the budget (300 KB gzipped).
func TestGzipAndBudget(t *testing.T) {
	h := New()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/ui/main.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("main.js not gzipped: %v", res.Header)
	}
	plain, gz := h.Sizes()
	t.Logf("initial load: %d bytes, %d gzipped", plain, gz)
	if gz == 0 || gz > 300<<10 {
		t.Errorf("initial load %d bytes gzipped, budget 300 KiB", gz)
	}
}

// TestLiveViewCSP: with live views the policy frames the ports domain's
// https names only, the rest as strict; a domain that would change the
// policy's meaning is refused; without live views nothing may be framed.
func TestLiveViewCSP(t *testing.T) {
	h, err := New().WithLiveViews("sandlot.localhost")
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/ui", nil))
	got := w.Header().Get("Content-Security-Policy")
	dirs := map[string]string{}
	for _, d := range strings.Split(got, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		dirs[name] = value
	}
	if dirs["frame-src"] != "https://*.sandlot.localhost" || dirs["script-src"] != "'self'" || dirs["default-src"] != "'none'" ||
		dirs["frame-ancestors"] != "'none'" || w.Code != 200 {
		t.Fatalf("CSP with live views: %d %q", w.Code, got)
	}
	w = httptest.NewRecorder()
	New().ServeHTTP(w, httptest.NewRequest("GET", "/ui", nil))
	if strings.Contains(w.Header().Get("Content-Security-Policy"), "frame-src") {
		t.Fatalf("a frame source without live views: %q", w.Header().Get("Content-Security-Policy"))
	}
	for _, bad := range []string{"", "x.test; script-src *", "x.test 'unsafe-inline'", "*.x.test", "X.TEST", ".x.test", "x..test",
		"x.test:8443", "x.test/", "x.test\n", "-x.test", "x.test."} {
		if _, err := New().WithLiveViews(bad); err == nil {
			t.Errorf("WithLiveViews(%q) accepted", bad)
		}
	}
}
