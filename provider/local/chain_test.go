package local

import (
	"context"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/provider/chain"
	"github.com/sandlot/sandlot/runtime"
)

// TestThroughChain: a chain over the local provider (what a quota or an
// E2B fallback puts in front of it) reports what the provider does and
// performs it on a real sandbox: usage, pause and resume with the
// kernel's state kept.
func TestThroughChain(t *testing.T) {
	p := newProvider(t, "crun", contexts.Limits{})
	c := chain.New([]contexts.Provider{p}, chain.Config{})
	if c.Capabilities() != p.Capabilities() || !c.Capabilities().Has(contexts.CapPause|contexts.CapUsage) {
		t.Fatalf("chain over local reports %s, local %s", c.Capabilities(), p.Capabilities())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, contexts.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	inner := sb.(interface{ Unwrap() contexts.Sandbox }).Unwrap().ID()
	if _, err := sb.RunCode(ctx, agentRun("python", "x = 41"), nil); err != nil {
		t.Fatal(err)
	}
	u, err := c.Usage(ctx, sb.ID())
	if err != nil || u.MemoryBytes == 0 || u.PIDs == 0 {
		t.Fatalf("usage through the chain: %+v, %v", u, err)
	}
	if err := c.Pause(ctx, sb.ID()); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Runtime().State(ctx, inner); err != nil || st.Status != runtime.StatusPaused {
		t.Fatalf("after a pause through the chain: %+v, %v; want paused", st, err)
	}
	if err := c.Resume(ctx, sb.ID()); err != nil {
		t.Fatal(err)
	}
	r, err := sb.RunCode(ctx, agentRun("python", "x + 1"), nil)
	if err != nil || mainText(r) != "42" {
		t.Fatalf("after resume: %+v, %v; want 42", r, err)
	}
	if err := c.Destroy(ctx, sb.ID()); err != nil {
		t.Fatal(err)
	}
}
