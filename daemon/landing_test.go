package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

// TestLandingAtRoot: GET / is the landing page (HTML for a browser, JSON
// otherwise) with the front door's version and /readyz's report; another
// method on / is /v1's JSON 404 or 405, not the page.
func TestLandingAtRoot(t *testing.T) {
	e := newEnv(t, func(c *frontConfig) {
		c.Version = "v9.9.9"
		c.V1.Progress = func(r *api.Readiness) {
			r.Waiting = append(r.Waiting, api.Work{What: "template default", Step: 5, Steps: 9, Phase: "installing packages"})
		}
	})
	w := e.do(t, req{method: "GET", path: "/", header: map[string]string{"Accept": "text/html"}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "v9.9.9") || !strings.Contains(w.Body.String(), "installing packages") ||
		w.Header().Get("Content-Security-Policy") == "" || w.Header().Get(api.HeaderRequestID) == "" {
		t.Fatalf("GET / as a browser: %d %v\n%s", w.Code, w.Header(), w.Body)
	}
	w = e.do(t, req{method: "GET", path: "/"})
	var doc api.Landing
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &doc) != nil || doc.Version != "v9.9.9" || doc.Readiness.Ready || len(doc.Readiness.Waiting) != 1 {
		t.Fatalf("GET / as JSON: %d %s", w.Code, w.Body)
	}
	w = e.do(t, req{method: "POST", path: "/"})
	if w.Code/100 != 4 || !strings.Contains(w.Header().Get("Content-Type"), "json") {
		t.Fatalf("POST /: %d %s", w.Code, w.Body)
	}
}

// TestExpectedStateLogged: a call refused for a state that passes (a
// template being built: errdefs.Retry) is answered 503 with Retry-After
// and logged at INFO, its state line and its access line under the
// request's id; a fault (unavailable without a retry time) stays an
// ERROR, now with the request id too (before, the /v1 fault line had an
// empty request_id: the front door set the id on the response only).
func TestExpectedStateLogged(t *testing.T) {
	var mu sync.Mutex
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	e := newEnv(t, func(c *frontConfig) { c.Logger, c.V1.Logger = log, log })
	type line struct {
		Level, Msg string
		RequestID  string `json:"request_id"`
	}
	linesOf := func(rid string) []line {
		mu.Lock()
		defer mu.Unlock()
		var out []line
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var ln line
			if json.Unmarshal([]byte(l), &ln) == nil && ln.RequestID == rid {
				out = append(out, ln)
			}
		}
		return out
	}
	call := func(fail error) (string, string) {
		e.Tools.Fail = fail
		w := e.do(t, req{method: "POST", path: "/v1/tools/run_code", key: e.KeyA, body: map[string]any{"args": map[string]any{"language": "python", "code": "1"}}})
		if w.Code != 503 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		return w.Header().Get(api.HeaderRequestID), w.Header().Get("Retry-After")
	}

	rid, retry := call(errdefs.Retry(errors.Join(errors.New("the default template is being built"), errdefs.ErrUnavailable), 10*time.Second))
	if retry != "10" {
		t.Errorf("Retry-After %q", retry)
	}
	got := linesOf(rid)
	if len(got) != 2 || got[0].Msg != "not ready yet" || got[1].Msg != "request" {
		t.Fatalf("log lines of %s: %+v", rid, got)
	}
	for _, l := range got {
		if l.Level != "INFO" {
			t.Errorf("%q logged at %s, want INFO", l.Msg, l.Level)
		}
	}

	rid, retry = call(errors.Join(errors.New("runtime gone"), errdefs.ErrUnavailable))
	got = linesOf(rid)
	if retry != "" || len(got) != 2 || got[0].Msg != "server fault" || got[0].Level != "ERROR" || got[1].Level != "ERROR" {
		t.Errorf("a fault: Retry-After %q, lines %+v", retry, got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
