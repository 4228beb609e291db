package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/guard"
)

// TestGuardWithoutEntityModel: a model that fails to load leaves the
// guard on its patterns and entity rules (enforce mode still redacts),
// the log says so, and /readyz's guard part says unavailable and why,
// without making the server unready.
func TestGuardWithoutEntityModel(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := guard.Config{}
	withEntityModel(&cfg, log, nil, errors.New("weights did not decode"))
	if cfg.Model != nil || cfg.ModelError == nil {
		t.Fatalf("config after a failed load: model %v, error %v", cfg.Model, cfg.ModelError)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "weights did not decode") {
		t.Errorf("the log does not say the model is missing: %s", logs.String())
	}
	g, err := guard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := g.Text(context.Background(), "t", "Dear Mary O'Brien, 14 Ardee Road, Rathmines, Dublin 6; mail mary@exemplar.ie")
	for _, v := range []string{"Mary", "Ardee", "mary@"} {
		if strings.Contains(out, v) {
			t.Errorf("enforce without the model let %q through: %s", v, out)
		}
	}
	r := api.Readiness{Status: "ok", Ready: true, Checks: map[string]string{}}
	guardHealth(g, &r)
	if r.Guard == nil || r.Guard.State != "unavailable" || !strings.Contains(r.Guard.Error, "weights did not decode") ||
		r.Guard.DaemonHeapBytes <= 0 || !r.Ready {
		t.Errorf("readiness without the model: %+v ready %v", r.Guard, r.Ready)
	}
}

// TestGuardEntityModelHealth: the loaded model's memory is reported
// beside the daemon's heap, and the log names it.
func TestGuardEntityModelHealth(t *testing.T) {
	m, err := entityModel()
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cfg := guard.Config{}
	withEntityModel(&cfg, slog.New(slog.NewTextHandler(&logs, nil)), m, nil)
	g, err := guard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var r api.Readiness
	guardHealth(g, &r)
	h := r.Guard
	if h == nil || h.State != "loaded" || h.EntityModel == "" || h.ModelBytes < 1<<20 || h.DaemonHeapBytes < h.ModelBytes {
		t.Errorf("readiness with the model: %+v", h)
	}
	if !strings.Contains(logs.String(), "guard entity model loaded") {
		t.Errorf("log: %s", logs.String())
	}
}
