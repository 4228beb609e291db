package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// testClock is a settable clock for the withdrawals.
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

// attempts counts the provider's Create calls, failed ones too.
type attempts struct {
	*contextstest.Provider
	n atomic.Int64
}

func (a *attempts) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	a.n.Add(1)
	return a.Provider.Create(ctx, spec)
}

// TestCodeToolsWithdrawnAfterCreateFailure: after a call of a request
// failed to create its sandbox, the request's code tools fail at once with
// that failure (no second create) and are left out of its tool list, for
// the cool-off; other requests, calls naming no request and the tools
// outside the execution context are untouched; a limit withdraws nothing.
func TestCodeToolsWithdrawnAfterCreateFailure(t *testing.T) {
	p := &attempts{Provider: contextstest.NewProvider()}
	m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1, MaxPerConversation: 1})
	defer m.Close(context.Background())
	r := New(m, Config{CreateCooloff: time.Minute})
	clk := &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	r.withdrawn.now = clk.Now
	call := func(request, tool, args string) (any, error) {
		id := contexts.Identity{TenantID: "t1", ConversationID: "c-" + request, PathID: "main"}
		return r.Call(context.Background(), Call{Name: tool, Identity: id, Args: json.RawMessage(args), Request: request}, nil)
	}
	code := `{"language":"python","code":"1"}`

	p.CreateErr = errors.New("runtime down")
	_, first := call("req-1", "run_code", code)
	if !errors.Is(first, contexts.ErrCreateFailed) || !errors.Is(first, errdefs.ErrUnavailable) {
		t.Fatalf("the failed create: %v", first)
	}
	created := p.n.Load()
	for _, tc := range []struct{ tool, args string }{
		{"run_code", code}, {"bash", `{"command":"true"}`}, {"read_file", `{"path":"x"}`},
		{"run_analysis", `{"analysisType":"custom","parameters":{},"code":"1"}`},
	} {
		_, err := call("req-1", tc.tool, tc.args)
		if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "withdrawn from this request") ||
			!strings.Contains(err.Error(), "runtime down") {
			t.Fatalf("%s in the withdrawn request: %v, want the creation failure at once", tc.tool, err)
		}
	}
	if p.n.Load() != created {
		t.Fatalf("a withdrawn request tried to create %d more sandboxes", p.n.Load()-created)
	}
	names := func(ts []Tool) string {
		var n []string
		for _, t := range ts {
			n = append(n, t.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(r.ToolsFor("req-1")); got != "" {
		t.Fatalf("tools of the withdrawn request: %q, want none (every tool runs in the execution context)", got)
	}
	if got, want := names(r.ToolsFor("req-2")), names(r.Tools()); got != want || want == "" {
		t.Fatalf("tools of another request: %q, want %q", got, want)
	}
	if until := r.WithdrawnUntil("req-1"); !until.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("withdrawn until %v", until)
	}

	// Another request, and a call naming none, still try to create.
	for _, req := range []string{"req-2", ""} {
		if _, err := call(req, "run_code", code); !errors.Is(err, contexts.ErrCreateFailed) {
			t.Fatalf("request %q: %v, want a create attempt that fails", req, err)
		}
	}
	if p.n.Load() == created {
		t.Fatal("other requests did not try to create")
	}

	// After the cool-off the request tries again, and succeeds.
	p.CreateErr = nil
	clk.Advance(time.Minute)
	if v, err := call("req-1", "run_code", code); err != nil || !v.(*RunCodeResult).Success {
		t.Fatalf("after the cool-off: %+v, %v", v, err)
	}
	if got := names(r.ToolsFor("req-1")); got != names(r.Tools()) {
		t.Fatalf("tools after the cool-off: %q", got)
	}

	// A limit is the model's to act on, not a creation failure.
	id := contexts.Identity{TenantID: "t1", ConversationID: "c-req-1", PathID: "branch"}
	v, err := r.Call(context.Background(), Call{Name: "run_code", Identity: id, Args: json.RawMessage(code), Request: "req-1"}, nil)
	if err != nil || v.(*RunCodeResult).Success {
		t.Fatalf("over the limit: %+v, %v", v, err)
	}
	if !r.WithdrawnUntil("req-1").IsZero() {
		t.Fatal("a limit withdrew the code tools")
	}

	// A negative cool-off never withdraws.
	never := New(m, Config{CreateCooloff: -1})
	p.CreateErr = errors.New("runtime down")
	for range 2 {
		never.Call(context.Background(), Call{Name: "run_code", Identity: contexts.Identity{TenantID: "t1", ConversationID: "n"}, Args: json.RawMessage(code), Request: "r"}, nil)
	}
	if !never.WithdrawnUntil("r").IsZero() {
		t.Fatal("CreateCooloff < 0 withdrew")
	}
}

// TestWithdrawalsBounded: the requests remembered are bounded; the oldest
// is forgotten first.
func TestWithdrawalsBounded(t *testing.T) {
	w := withdrawals{now: time.Now}
	for i := range maxWithdrawals + 50 {
		w.add("r"+strconv.Itoa(i), errors.New("x"), time.Hour)
	}
	if len(w.m) != maxWithdrawals || len(w.order) > 2*maxWithdrawals {
		t.Fatalf("%d remembered, %d in order", len(w.m), len(w.order))
	}
	if _, ok := w.get("r0"); ok {
		t.Fatal("the oldest was kept")
	}
	if _, ok := w.get("r" + strconv.Itoa(maxWithdrawals+49)); !ok {
		t.Fatal("the newest was forgotten")
	}
}
