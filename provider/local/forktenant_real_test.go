package local

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestForkCheckpointOtherTenant (runsc) attacks a fork checkpoint's name:
// another tenant's create naming it is refused as not found, and leaves
// no sandbox; the source's tenant's restores it. Before, any create that
// named the checkpoint got the source's memory.
func TestForkCheckpointOtherTenant(t *testing.T) {
	p := newProviderWith(t, Config{Runtime: "runsc", Prestart: []string{agent.Python}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mine := map[string]string{contexts.LabelTenant: "t1"}
	sb, err := p.Create(ctx, contexts.Spec{Labels: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if r := runCode(t, sb.(*Sandbox).Client, agent.Python, "x = 41"); !r.Success {
		t.Fatalf("x = 41: %+v", r.Error)
	}
	ck, src, err := p.ForkCheckpoint(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer p.DropForkCheckpoint(ctx, ck)
	before, _ := p.List(ctx)
	if f, err := p.Create(ctx, contexts.Spec{MemoryCheckpoint: ck, Labels: map[string]string{contexts.LabelTenant: "t2"}}); !errors.Is(err, errdefs.ErrNotFound) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("another tenant's create from the checkpoint: %v, want not_found", err)
	}
	if after, _ := p.List(ctx); len(after) != len(before) {
		t.Fatalf("a refused fork left a sandbox: %v, was %v", after, before)
	}
	f, err := p.Create(ctx, contexts.Spec{MemoryCheckpoint: ck, Labels: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := mainText(runCode(t, f.(*Sandbox).Client, agent.Python, "x + 1")); got != "42" {
		t.Fatalf("x + 1 in the tenant's own fork = %q, want 42", got)
	}
}
