package control_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/templatestest"
	"github.com/sandlot/sandlot/tenant"
)

// TestAutoPauseToDisk: lifecycle {onTimeout: {action: 'pause', keepMemory:
// false}} (autoPauseMemory false) suspends the sandbox to disk at its
// timeout instead of answering 400: it shows paused, its sandbox is gone,
// the suspend is held as E2B's pause is (an envd call answers 502 paused
// and wakes nothing), and connect boots it again. Before, the create was
// a 400 "not supported".
func TestAutoPauseToDisk(t *testing.T) {
	testenv.RequireRoot(t) // layer.Apply keeps owners
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	for _, id := range tenants {
		if err := st.CreateTenant(context.Background(), &tenant.Tenant{ID: id}, tenant.HashKey("k-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	cat := templates.New(templates.Config{Store: st, Images: s, Snapshots: st})
	archive := templatestest.DockerArchive(t, templatestest.Image(t, "app"), "example.test/app:v1")
	if _, err := cat.Import(context.Background(), tenants[key1], archive, templates.Spec{Name: "app"}, nil); err != nil {
		t.Fatal(err)
	}
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{Catalog: cat}, Manager: contexts.Config{Catalog: cat}})
	sb := e.Create(key1, `{"templateID":"app","timeout":1,"autoPause":true,"autoPauseMemory":false}`)
	rec, err := e.M.Get(context.Background(), tenants[key1], sb.SandboxID)
	if err != nil || !rec.AutoPauseToDisk || rec.AutoPause <= 0 {
		t.Fatalf("created: %+v, %v; want a pause to disk at the timeout", rec, err)
	}
	sandbox := rec.SandboxID
	// The cleanup pass or the next look at it suspends it once past its
	// timeout; wait for that, bounded.
	deadline := time.Now().Add(60 * time.Second)
	for {
		info := decode[struct{ State string }](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1))
		if info.State == "paused" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("past its timeout: state %q, want paused", info.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	rec, err = e.M.Get(context.Background(), tenants[key1], sb.SandboxID)
	if err != nil || !rec.Suspended() || !rec.SuspendHeld || rec.SandboxID != "" {
		t.Fatalf("paused at the timeout: %+v, %v; want suspended to disk, held", rec, err)
	}
	if ids, _ := e.P.List(context.Background()); containsID(ids, sandbox) {
		t.Fatal("the sandbox of a context suspended at its timeout still runs")
	}
	if r := e.Do("GET", "/health", nil, e.Headers(sb, "49983")...); r.StatusCode != 502 {
		t.Fatalf("envd health of a sandbox paused without memory: %d, want 502 (not woken without autoResume)", r.StatusCode)
	}
	if got, _ := e.M.Get(context.Background(), tenants[key1], sb.SandboxID); !got.Suspended() {
		t.Fatal("an envd call woke a held suspend")
	}
	resp := e.Do("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", strings.NewReader(`{"timeout":60}`), "X-API-KEY", key1)
	if resp.StatusCode != 201 {
		t.Fatalf("connect to the sandbox suspended at its timeout: %d, want 201", resp.StatusCode)
	}
	rec, err = e.M.Get(context.Background(), tenants[key1], sb.SandboxID)
	if err != nil || rec.Suspended() || rec.SandboxID == "" || rec.SandboxID == sandbox {
		t.Fatalf("after connect: %+v, %v; want running on a new sandbox", rec, err)
	}
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
