package landing

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
)

func serve(t *testing.T, h http.Handler, method, accept string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "/", nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestLanding: a browser gets a self-contained page (no script, nothing
// loaded from elsewhere, a strict CSP whose hash allows exactly its one
// style) with the version, the status, each build's progress and the
// links, reloading itself while work is under way; a JSON client gets the
// same as api.Landing; HEAD gets the headers only.
func TestLanding(t *testing.T) {
	rd := api.Readiness{Status: "unavailable", Checks: map[string]string{"store": "ok", "template default": "building"},
		Waiting: []api.Work{{What: "template default", Stage: "core", StageIndex: 1, Stages: 2, Step: 5, Steps: 9,
			Phase: "installing packages", Done: 12, Total: 40, Package: "python3.11", ElapsedSeconds: 70, ETASeconds: 45}}}
	h := New(Config{Version: "v1.2.3", Console: "/ui", Readiness: func(context.Context) (int, api.Readiness) { return 503, rd }})

	w := serve(t, h, "GET", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	body := w.Body.String()
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
	}
	for _, want := range []string{"v1.2.3", "not ready", "template default: building", "stage core (1 of 2)",
		"step 5 of 9: installing packages", "12 of 40 packages set up (now python3.11)", "about 45s left in this step",
		`<progress value="12" max="40">`, `href="/v1/openapi.json"`, `href="` + DocsURL + `"`, `href="/ui"`,
		`<meta http-equiv="refresh" content="5">`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(strings.ToLower(body), "<script") || regexp.MustCompile(`(src|href)="(https?:)?//`).FindString(strings.ReplaceAll(body, DocsURL, "")) != "" {
		t.Errorf("the page has a script or loads from elsewhere:\n%s", body)
	}
	csp := w.Header().Get("Content-Security-Policy")
	m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no style element")
	}
	sum := sha256.Sum256([]byte(m[1]))
	for _, want := range []string{"default-src 'none'", "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", w.Header())
	}

	for _, accept := range []string{"", "application/json", "*/*"} {
		w = serve(t, h, "GET", accept)
		var doc api.Landing
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &doc) != nil || doc.Version != "v1.2.3" || doc.Readiness.Ready ||
			len(doc.Readiness.Waiting) != 1 || doc.Links["openapi"] != "/v1/openapi.json" || doc.Links["console"] != "/ui" {
			t.Errorf("Accept %q: %d %s", accept, w.Code, w.Body)
		}
	}
	if w = serve(t, h, "HEAD", "text/html"); w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") == "0" {
		t.Errorf("HEAD: %d, %d bytes, length %q", w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
	}
}

// TestLandingReady: a ready server without work says so, names the live
// stage, stops reloading, and links no console it does not have.
func TestLandingReady(t *testing.T) {
	rd := api.Readiness{Status: "ok", Ready: true, Checks: map[string]string{"store": "ok"}, Live: map[string]string{"default": "full"}}
	h := New(Config{Readiness: func(context.Context) (int, api.Readiness) { return 200, rd }})
	body := serve(t, h, "GET", "text/html").Body.String()
	for _, want := range []string{"version devel", ">ready<", "template default: sandboxes start from its full image"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "refresh") || strings.Contains(body, "console") {
		t.Errorf("a ready page without work reloads or links a console:\n%s", body)
	}
}

// TestLandingEscapes: text from the readiness report is escaped.
func TestLandingEscapes(t *testing.T) {
	rd := api.Readiness{Status: "unavailable", Checks: map[string]string{"<b>x</b>": "unavailable"},
		Waiting: []api.Work{{What: "template <script>alert(1)</script>", Phase: "x"}}}
	h := New(Config{Readiness: func(context.Context) (int, api.Readiness) { return 503, rd }})
	body := serve(t, h, "GET", "text/html").Body.String()
	if strings.Contains(body, "<script>") || strings.Contains(body, "<b>x") {
		t.Errorf("unescaped:\n%s", body)
	}
}
