package control_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
)

// testClock is a manager clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestReservedMetadataRefused: over the real manager, a create whose
// metadata holds a "sandlot." key is a 400 naming the key, and nothing is
// created; metadata with other keys works as on E2B, and getInfo and the
// list show exactly the caller's metadata, while the sandbox's lifecycle
// (template, autoPause, autoResume) is kept beside it.
func TestReservedMetadataRefused(t *testing.T) {
	e, p := newManagerEnv(t, contexts.Config{})
	resp := e.Do("POST", "/v2/sandboxes", strings.NewReader(`{"metadata":{"team":"a","sandlot.paused":"2026-01-01T00:00:00Z"}}`),
		"X-API-KEY", key1, "Content-Type", "application/json")
	if got := decode[apiErr](t, resp); resp.StatusCode != 400 || !strings.Contains(got.Message, `"sandlot.paused"`) {
		t.Fatalf("create with a sandlot. metadata key: %d %+v, want 400 naming the key", resp.StatusCode, got)
	}
	if n := p.Created(); n != 0 {
		t.Fatalf("a refused create made %d sandboxes", n)
	}

	sb := e.Create(key1, `{"templateID":"code-interpreter-v1","autoPause":true,"autoResume":{"enabled":true},
		"metadata":{"team":"a","conversationId":"conv-1","sandlotDeployment":"d"}}`)
	want := map[string]string{"team": "a", "conversationId": "conv-1", "sandlotDeployment": "d"}
	info := decode[listed](t, e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1))
	if d := cmp.Diff(want, info.Metadata); d != "" || info.TemplateID != "code-interpreter-v1" {
		t.Fatalf("getInfo: template %q, metadata (-want +got):\n%s", info.TemplateID, d)
	}
	for _, q := range []string{"metadata=team%3Da", "template=code-interpreter-v1", ""} {
		items := decode[[]listed](t, e.Do("GET", "/v2/sandboxes?"+q, nil, "X-API-KEY", key1))
		if len(items) != 1 || items[0].SandboxID != sb.SandboxID {
			t.Fatalf("list %q: %+v, want the sandbox", q, items)
		}
		if d := cmp.Diff(want, items[0].Metadata); d != "" {
			t.Fatalf("list %q: metadata (-want +got):\n%s", q, d)
		}
	}
	if items := decode[[]listed](t, e.Do("GET", "/v2/sandboxes?template=base", nil, "X-API-KEY", key1)); len(items) != 0 {
		t.Fatalf("list template=base: %+v, want none", items)
	}
}

// TestEdgeUsesManagerClock: the E2B surface judges a sandbox's end by the
// manager's clock, not the wall clock: past its timeout by that clock an
// autoPause sandbox is paused (and shown so) and a plain one is gone, with
// no time passing on the wall.
func TestEdgeUsesManagerClock(t *testing.T) {
	clk := &testClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	e, _ := newManagerEnv(t, contexts.Config{Clock: clk.Now})
	auto := e.Create(key1, `{"timeout":60,"autoPause":true}`)
	plain := e.Create(key1, `{"timeout":60}`)
	state := func(sb created) (int, string) {
		resp := e.Do("GET", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", key1)
		return resp.StatusCode, decode[struct{ State string }](t, resp).State
	}
	if code, st := state(auto); code != 200 || st != "running" {
		t.Fatalf("before its timeout: %d %q, want running", code, st)
	}
	clk.Advance(61 * time.Second)
	if code, st := state(auto); code != 200 || st != "paused" {
		t.Fatalf("autoPause sandbox past its timeout by the manager's clock: %d %q, want paused", code, st)
	}
	if code, _ := state(plain); code != 404 {
		t.Fatalf("plain sandbox past its timeout by the manager's clock: getInfo %d, want 404", code)
	}
}
