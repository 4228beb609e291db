package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/errdefs"
)

// TestReadinessWaitsForWork: /readyz answers 503 while the daemon waits
// for work (the default template's first image), saying what it waits
// for and how far it is; work that is not waited for (the next stage)
// leaves it ready and is shown. /healthz stays 200 throughout.
func TestReadinessWaitsForWork(t *testing.T) {
	building := api.Work{What: "template default", Stage: "core", StageIndex: 1, Stages: 2, Step: 5, Steps: 9,
		Phase: "installing packages", Done: 12, Total: 40, Package: "python3.11", ElapsedSeconds: 30, ETASeconds: 45}
	var mu sync.Mutex
	waiting := true
	e := newEnv(t, func(c *server.Config) {
		c.Ready = map[string]server.Check{"store": func(context.Context) error { return nil }}
		c.Progress = func(r *api.Readiness) {
			mu.Lock()
			defer mu.Unlock()
			if waiting {
				r.Checks["template default"] = "building"
				r.Waiting = append(r.Waiting, building)
				return
			}
			r.Checks["template default"] = "ok"
			r.Live = map[string]string{"default": "core"}
			full := building
			full.Stage, full.StageIndex = "full", 2
			r.Building = append(r.Building, full)
		}
	})
	read := func(wantCode int) api.Readiness {
		t.Helper()
		w := e.do(t, req{method: "GET", path: "/readyz"})
		var r api.Readiness
		if w.Code != wantCode || json.Unmarshal(w.Body.Bytes(), &r) != nil {
			t.Fatalf("/readyz: %d %s, want %d", w.Code, w.Body, wantCode)
		}
		return r
	}
	got := read(503)
	want := api.Readiness{Status: "unavailable", Ready: false, Checks: map[string]string{"store": "ok", "template default": "building"},
		Waiting: []api.Work{building}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("/readyz while the core builds (-want +got):\n%s", d)
	}
	if w := e.do(t, req{method: "GET", path: "/healthz"}); w.Code != 200 {
		t.Errorf("/healthz while building: %d", w.Code)
	}
	mu.Lock()
	waiting = false
	mu.Unlock()
	got = read(200)
	if !got.Ready || got.Live["default"] != "core" || len(got.Building) != 1 || got.Building[0].Stage != "full" || len(got.Waiting) != 0 {
		t.Errorf("/readyz while the full image builds: %+v", got)
	}
}

// TestExpectedStateLogging: an error that says when to come back
// (errdefs.Retry: a template being built) is a 503 with Retry-After, its
// message for the caller, logged as a state at INFO under the request's
// id; it is not logged as a server fault.
func TestExpectedStateLogging(t *testing.T) {
	var mu sync.Mutex
	var logs bytes.Buffer
	e := newEnv(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	})
	// As the template builders say it: a sentence for the caller, a time
	// to come back, the chain for the log.
	e.Contexts.FailAll = errdefs.Retry(errdefs.Public(fmtErr("the default template is being built (step 5/9)", errdefs.ErrUnavailable),
		"The sandbox is still being prepared: the default template is being built (step 5/9); retry in 10s."), 10*time.Second)
	w := e.do(t, req{method: "GET", path: "/v1/contexts", key: e.KeyA, header: map[string]string{api.HeaderRequestID: "rid-42"}})
	if w.Code != 503 || w.Header().Get("Retry-After") != "10" {
		t.Fatalf("status %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if got := decodeErr(t, w); got.Code != errdefs.CodeUnavailable || !strings.Contains(got.Message, "being built") {
		t.Errorf("body %+v", got)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if strings.Contains(out, "server fault") || strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("an expected state logged as a fault:\n%s", out)
	}
	var line struct {
		Level, Msg string
		RequestID  string `json:"request_id"`
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "not ready yet" {
			break
		}
		line.Msg = ""
	}
	if line.Msg == "" || line.Level != "INFO" || line.RequestID != "rid-42" {
		t.Errorf("no INFO line of the state with the request id:\n%s", out)
	}
}
