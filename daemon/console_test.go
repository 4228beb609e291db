package daemon

import (
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/console"
)

// TestConsoleAtUI: the front door serves the console at /ui without a
// key (the page is the sign-in form; every call it makes then carries
// one), with the console's CSP and a request id, and the landing page
// links it; /v1 keeps its own answers beside it.
func TestConsoleAtUI(t *testing.T) {
	e := newEnv(t, func(c *frontConfig) { c.Console = console.New() })
	w := e.do(t, req{method: "GET", path: "/ui"})
	if w.Code != 200 || w.Header().Get("Content-Security-Policy") != console.CSP || w.Header().Get(api.HeaderRequestID) == "" ||
		!strings.Contains(w.Body.String(), "Sign in") {
		t.Fatalf("GET /ui: %d %v\n%s", w.Code, w.Header(), w.Body)
	}
	if w := e.do(t, req{method: "GET", path: "/ui/main.js"}); w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") {
		t.Fatalf("GET /ui/main.js: %d %v", w.Code, w.Header())
	}
	if w := e.do(t, req{method: "GET", path: "/uix"}); w.Code != 404 || !strings.Contains(w.Header().Get("Content-Type"), "json") {
		t.Fatalf("GET /uix is not the console's: %d %v", w.Code, w.Header())
	}
	w = e.do(t, req{method: "GET", path: "/", header: map[string]string{"Accept": "text/html"}})
	if !strings.Contains(w.Body.String(), `href="/ui"`) {
		t.Fatalf("the landing page does not link the console:\n%s", w.Body)
	}
	if w := e.do(t, req{method: "GET", path: "/v1/contexts"}); w.Code != 401 {
		t.Fatalf("GET /v1/contexts without a key: %d", w.Code)
	}
}
