package contexts_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// unreachableProvider is one replica's handle on a shared provider whose
// attach can be made to fail for a reason that is not the sandbox's loss
// (the cluster's API server busy, the pod network not yet open to a new
// replica), and whose List can hide every sandbox (the kubernetes
// provider's List leaves out sandboxes made in the last minutes).
type unreachableProvider struct {
	*contextstest.Provider
	fail atomic.Bool
	hide atomic.Bool
	gen  atomic.Int64 // Break ends the connections of generations before
}

func (p *unreachableProvider) Attach(ctx context.Context, id string) (contexts.Sandbox, error) {
	if p.fail.Load() {
		return nil, fmt.Errorf("kubernetes: read the claim: client rate limiter Wait returned an error: %w", errdefs.ErrUnavailable)
	}
	sb, err := p.Provider.Attach(ctx, id)
	if err != nil {
		return nil, err
	}
	return &conn{Sandbox: sb, p: p, gen: p.gen.Load()}, nil
}

// Break ends this replica's connections made so far; the sandboxes run on.
func (p *unreachableProvider) Break() { p.gen.Add(1) }

// conn is one replica's connection to a sandbox: it fails once broken.
type conn struct {
	contexts.Sandbox
	p   *unreachableProvider
	gen int64
}

func (c *conn) Ping(ctx context.Context) error {
	if c.gen != c.p.gen.Load() {
		return fmt.Errorf("connection reset: %w", errdefs.ErrUnavailable)
	}
	return c.Sandbox.Ping(ctx)
}

func (c *conn) RunCode(ctx context.Context, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
	if c.gen != c.p.gen.Load() {
		return nil, fmt.Errorf("connection reset: %w", errdefs.ErrUnavailable)
	}
	return c.Sandbox.RunCode(ctx, p, out)
}

func (p *unreachableProvider) List(ctx context.Context) ([]string, error) {
	if p.hide.Load() {
		return nil, nil
	}
	return p.Provider.List(ctx)
}

// TestSharedUnreachableIsNotLost: with a shared provider, a replica that
// cannot attach a context's sandbox for any reason but the provider's
// not_found keeps the context: the call fails with unavailable, and the
// next one, once the sandbox is reachable, runs with the state; a
// connection of this replica that stops answering is attached again, not
// taken for a lost sandbox; the holder of the cluster lease does not end
// the record either. Only the provider's not_found ends it. Before, each of
// these ended the context as lost and the next call got a fresh sandbox.
func TestSharedUnreachableIsNotLost(t *testing.T) {
	ctx := context.Background()
	st, clk := memory.New(), newClock()
	fake := contextstest.NewProvider()
	fake.Shared = true
	start := func(node string, p contexts.Provider) *contexts.Manager {
		m := contexts.NewManager(st, p, contexts.Config{Node: node, Clock: clk.Now, PoolSize: -1, CleanupInterval: 1 << 62})
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		return m
	}
	run := func(m *contexts.Manager, id contexts.Identity, code string) (*contexts.ExecuteResult, error) {
		return m.Execute(ctx, id, contexts.ExecuteRequest{Language: "python", Code: code}, nil)
	}
	a := start("node-a", fake)
	bp := &unreachableProvider{Provider: fake}
	b := start("node-b", bp)
	id := ident("t1", "c", "main")
	first, err := run(a, id, "v = 1")
	if err != nil {
		t.Fatal(err)
	}

	bp.fail.Store(true)
	_, err = run(b, id, "print(v)")
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("node-b, its attach failing: %v, want unavailable", err)
	}
	if rec, err := st.Get(ctx, first.ContextID); err != nil || !rec.State.Active() {
		t.Fatalf("the record after node-b's failed attach: %+v, %v; want active", rec, err)
	}
	bp.fail.Store(false)
	check := func(m *contexts.Manager, who string) {
		t.Helper()
		res, err := run(m, id, "print(v)")
		if err != nil || strings.TrimSpace(res.Stdout) != "1" || res.ContextID != first.ContextID || res.StateLost {
			t.Fatalf("%s: %+v, %v; want v in context %s, nothing lost", who, res, err, first.ContextID)
		}
	}
	check(b, "node-b once it reaches the sandbox")

	// node-b's connection stops answering (its end of the network): the
	// sandbox is attached again.
	bp.Break()
	check(b, "node-b after its connection dropped")

	// The holder of the lease (node-a, which started first) ends lost
	// records: a sandbox its List misses and whose attach fails with
	// unavailable is not one.
	bp.hide.Store(true)
	bp.fail.Store(true)
	if _, err := b.Cleanup(ctx); err != nil {
		t.Logf("node-b cleanup: %v", err)
	}
	ap := &unreachableProvider{Provider: fake}
	ap.hide.Store(true)
	ap.fail.Store(true)
	a.Close(ctx) // gives the lease up
	c := start("node-c", ap)
	if !c.HoldsLease() {
		t.Fatal("node-c does not hold the lease after node-a gave it up")
	}
	if _, err := c.Cleanup(ctx); err != nil {
		t.Logf("node-c cleanup: %v", err)
	}
	if rec, err := st.Get(ctx, first.ContextID); err != nil || !rec.State.Active() {
		t.Fatalf("the record after the lease holder's passes, attach failing: %+v, %v; want active", rec, err)
	}
	bp.fail.Store(false)
	check(b, "node-b after the holder's passes")

	// The provider's not_found ends it.
	if err := fake.Destroy(ctx, first.SandboxID); err != nil {
		t.Fatal(err)
	}
	ap.fail.Store(false)
	if _, err := c.Cleanup(ctx); err != nil {
		t.Logf("node-c cleanup: %v", err)
	}
	if rec, err := st.Get(ctx, first.ContextID); err != nil || rec.State.Active() {
		t.Fatalf("the record after its sandbox was destroyed: %+v, %v; want ended", rec, err)
	}
}
