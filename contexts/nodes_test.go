package contexts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// nodePair is two nodes on one store and one clock. With shared set they
// share one provider (E2B-like: any node reaches every sandbox); otherwise
// each has its own (local providers on different hosts).
type nodePair struct {
	a, b  *env
	clock *clock
}

func newNodePair(t *testing.T, shared bool) *nodePair {
	t.Helper()
	st, clk := memory.New(), newClock()
	pa, pb := contextstest.NewProvider(), contextstest.NewProvider()
	pa.IDPrefix, pb.IDPrefix = "a-", "b-"
	if shared {
		pb = pa
	}
	a := (&env{t: t, ctx: context.Background(), p: pa, store: st, clock: clk}).start(contexts.Config{Node: "node-a"})
	b := (&env{t: t, ctx: context.Background(), p: pb, store: st, clock: clk}).start(contexts.Config{Node: "node-b"})
	return &nodePair{a: a, b: b, clock: clk}
}

// lapse moves the clock past the lease; only the nodes named renew theirs.
func (n *nodePair) lapse(t *testing.T, renew ...*env) {
	t.Helper()
	n.clock.Advance(contexts.DefaultNodeLease + time.Second)
	for _, e := range renew {
		if err := e.m.Heartbeat(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func wantOwnedBy(t *testing.T, err error, node string) {
	t.Helper()
	wantCategory(t, err, errdefs.ErrUnavailable)
	if !strings.Contains(err.Error(), `node "`+node+`"`) {
		t.Fatalf("refusal %q does not name the owner %s", err, node)
	}
}

// TestNodeRefusesLiveOwnersContext: a call that reaches node B for a
// context of live node A is refused, naming A, through every entry point,
// and A's context is untouched.
func TestNodeRefusesLiveOwnersContext(t *testing.T) {
	for _, shared := range []bool{false, true} {
		n := newNodePair(t, shared)
		met := newCollector()
		n.b = n.b.second(contexts.Config{Node: "node-b", Meter: met.meter()})
		id := ident("t1", "c1", "main")
		first := n.a.exec(id, "x = 1")
		_, err := n.b.m.Execute(n.b.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "x = 2"}, nil)
		wantOwnedBy(t, err, "node-a")
		_, err = n.b.m.GetOrCreate(n.b.ctx, id, contexts.CreateOptions{})
		wantOwnedBy(t, err, "node-a")
		err = n.b.m.Use(n.b.ctx, id, contexts.CreateOptions{}, func(context.Context, *contexts.Record, contexts.Sandbox) error { return nil })
		wantOwnedBy(t, err, "node-a")
		_, err = n.b.m.Execute(n.b.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "x = 2", ContextID: first.ContextID}, nil)
		wantOwnedBy(t, err, "node-a")
		_, err = n.b.m.SetTTL(n.b.ctx, "t1", first.ContextID, time.Second)
		wantOwnedBy(t, err, "node-a")
		if got := n.a.exec(id, "print(x)"); got.ContextID != first.ContextID || got.Stdout != "1\n" {
			t.Fatalf("shared=%v: A's context after B's refusals: %+v", shared, got)
		}
		if rec := n.a.record(first.ContextID); rec.Node != "node-a" || rec.State != contexts.StateReady {
			t.Fatalf("shared=%v: record %+v", shared, rec)
		}
		if got := met.values(t)["sandlot.executions{language=python,outcome="+contexts.OutcomeFault+"}"]; got != 0 {
			t.Fatalf("shared=%v: %v refusals counted as faults", shared, got)
		}
	}
}

// TestNodeTakeover: once A's lease has lapsed, a call on B takes A's
// context over. With separate providers B cannot reach the sandbox: the
// context ends as lost and B serves a fresh one. With a shared provider B
// attaches and the state survives; A, should it come back, drops the
// context and is refused from then on.
func TestNodeTakeover(t *testing.T) {
	t.Run("separate providers", func(t *testing.T) {
		n := newNodePair(t, false)
		id := ident("t1", "c1", "main")
		first := n.a.exec(id, "x = 1")
		n.lapse(t, n.b)
		res := n.b.exec(id, "print(x)")
		if res.ContextID == first.ContextID || res.Stdout == "1\n" {
			t.Fatalf("B after A's lease lapsed: %+v", res)
		}
		old := n.a.record(first.ContextID)
		if old.State != contexts.StateError || !strings.HasPrefix(old.LastError, "sandbox lost") || old.Node != "node-b" {
			t.Fatalf("taken-over record: %+v", old)
		}
		if rec := n.b.record(res.ContextID); rec.Node != "node-b" {
			t.Fatalf("new record's node %q", rec.Node)
		}
	})
	t.Run("shared provider", func(t *testing.T) {
		n := newNodePair(t, true)
		id := ident("t1", "c1", "main")
		first := n.a.exec(id, "x = 1")
		// A's write of that call lands before B takes over: one landing
		// after it would show A the new owner, and A would drop the
		// context before its call below.
		contexts.Settle(n.a.m)
		n.lapse(t, n.b)
		res := n.b.exec(id, "print(x)")
		if res.ContextID != first.ContextID || res.SandboxID != first.SandboxID || res.Stdout != "1\n" {
			t.Fatalf("B after A's lease lapsed: %+v, want A's context and state", res)
		}
		if rec := n.b.record(first.ContextID); rec.Node != "node-b" || rec.State != contexts.StateReady {
			t.Fatalf("taken-over record: %+v", rec)
		}
		// A comes back: its next store write shows the new owner, so it
		// drops the context (without destroying it) and then refuses.
		if err := n.a.m.Heartbeat(n.a.ctx); err != nil {
			t.Fatal(err)
		}
		n.a.exec(id, "1")
		contexts.Settle(n.a.m) // that write is behind the answer
		_, err := n.a.m.Execute(n.a.ctx, id, contexts.ExecuteRequest{Language: "python", Code: "print(x)"}, nil)
		wantOwnedBy(t, err, "node-b")
		if got := n.b.exec(id, "print(x)"); got.ContextID != first.ContextID || got.Stdout != "1\n" {
			t.Fatalf("B after A came back: %+v", got)
		}
	})
}

// TestNodeCleanupLeavesLiveOwners: reconcile and cleanup passes of B end
// nothing of live node A (not its expired contexts, which A expires, nor
// its stuck creations) and kill none of A's sandboxes; once A's lease
// lapsed, B expires A's expired contexts and ends its stuck creations, so
// a node that never comes back leaves nothing active.
func TestNodeCleanupLeavesLiveOwners(t *testing.T) {
	n := newNodePair(t, false)
	ctx := context.Background()
	kept := n.a.exec(ident("t1", "kept", "main"), "x = 1")
	stale := n.a.exec(ident("t1", "stale", "main"), "x = 1")
	stuck := &contexts.Record{Identity: ident("t1", "stuck", "main"), Node: "node-a", Provider: "fake",
		CreatedAt: n.clock.Now(), ExpiresAt: n.clock.Now().Add(time.Hour)}
	if err := n.a.store.Create(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	n.b = n.b.second(contexts.Config{Node: "node-b"}) // B restarts: reconcile
	n.clock.Advance(contexts.DefaultCreatingTimeout + time.Second)
	if err := n.a.store.Touch(ctx, kept.ContextID, n.clock.Now(), n.clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.a.m.SetTTL(ctx, "t1", stale.ContextID, time.Second); err != nil {
		t.Fatal(err)
	}
	n.clock.Advance(2 * time.Second)
	for _, e := range []*env{n.a, n.b} {
		if err := e.m.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := n.b.m.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{kept.ContextID, stale.ContextID, stuck.ID} {
		if rec := n.a.record(c); !rec.State.Active() {
			t.Fatalf("B's cleanup ended live node A's context: %+v", rec)
		}
	}
	if !n.a.running(kept.SandboxID) || !n.a.running(stale.SandboxID) {
		t.Fatalf("A's sandboxes after B's cleanup: %v", n.a.p.Running())
	}

	// A dies: B ends what expired and what was stuck, and leaves the rest
	// until it expires or a call takes it over.
	n.lapse(t, n.b)
	if _, err := n.b.m.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := n.a.record(stale.ContextID); rec.State != contexts.StateTerminated || rec.Reason != contexts.ReasonExpired {
		t.Fatalf("dead node's expired context: %+v", rec)
	}
	if rec := n.a.record(stuck.ID); rec.State != contexts.StateError {
		t.Fatalf("dead node's stuck creation: %+v", rec)
	}
	if rec := n.a.record(kept.ContextID); rec.State != contexts.StateReady {
		t.Fatalf("dead node's unexpired context: %+v", rec)
	}
}

// TestNodeTerminateFromAnotherNode: ending a context through another node
// (a manual terminate, a path event) ends its record; the owner's cleanup
// drops the context and its sweep destroys the sandbox, and the next call
// gets a fresh context.
func TestNodeTerminateFromAnotherNode(t *testing.T) {
	n := newNodePair(t, false)
	id := ident("t1", "c1", "main")
	first := n.a.exec(id, "x = 1")
	if err := n.b.m.Terminate(n.b.ctx, "t1", first.ContextID, ""); err != nil {
		t.Fatal(err)
	}
	if rec := n.a.record(first.ContextID); rec.State != contexts.StateTerminated || rec.Reason != contexts.ReasonManual {
		t.Fatalf("record after B's terminate: %+v", rec)
	}
	// A's cleanup drops the context; the sweep's grace is one pass.
	for range 2 {
		if _, err := n.a.m.Cleanup(n.a.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n.a.running(first.SandboxID) {
		t.Fatalf("sandbox %s of the ended context still runs", first.SandboxID)
	}
	if res := n.a.exec(id, "print(x)"); res.ContextID == first.ContextID || res.Stdout == "1\n" {
		t.Fatalf("A after B ended its context: %+v", res)
	}
	if st := n.a.m.Stats(); st.Active != 1 {
		t.Fatalf("A serves %d contexts, want 1", st.Active)
	}
}

// TestReconcileClaimsRecordsWithoutNode: records written before nodes
// existed belong to no node. At start a node claims those whose sandbox
// its provider runs; the others stay unowned for expiry or a takeover.
func TestReconcileClaimsRecordsWithoutNode(t *testing.T) {
	e := newEnv(t, contexts.Config{}) // the unnamed node: writes records of no node
	mine, other := ident("t1", "mine", "main"), ident("t1", "other", "main")
	rm := e.exec(mine, "x = 1")
	ro := e.exec(other, "x = 2")
	e.m.Close(e.ctx)
	e.p.Vanish(ro.SandboxID) // its sandbox is on another host now

	e.start(contexts.Config{Node: "node-a"})
	if rec := e.record(rm.ContextID); rec.Node != "node-a" || rec.State != contexts.StateReady {
		t.Fatalf("record whose sandbox runs here: %+v", rec)
	}
	if rec := e.record(ro.ContextID); rec.Node != "" || rec.State != contexts.StateReady {
		t.Fatalf("record whose sandbox runs elsewhere: %+v", rec)
	}
	if got := e.exec(mine, "print(x)"); got.ContextID != rm.ContextID || got.Stdout != "1\n" {
		t.Fatalf("claimed context: %+v", got)
	}
}
