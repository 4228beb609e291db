package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
	if f, err := p.Create(ctx, contexts.Spec{Memory: ck, Labels: map[string]string{contexts.LabelTenant: "t2"}}); !errors.Is(err, errdefs.ErrNotFound) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("another tenant's create from the checkpoint: %v, want not_found", err)
	}
	if after, _ := p.List(ctx); len(after) != len(before) {
		t.Fatalf("a refused fork left a sandbox: %v, was %v", after, before)
	}
	f, err := p.Create(ctx, contexts.Spec{Memory: ck, Labels: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := mainText(runCode(t, f.(*Sandbox).Client, agent.Python, "x + 1")); got != "42" {
		t.Fatalf("x + 1 in the tenant's own fork = %q, want 42", got)
	}
}

// TestForkChannelPruned (runsc): a fork's woken agent removes the sockets
// placed for its restore (the source's moved-aside ones): a fork of a fork
// of ... starts with a channel of a few entries, not its source's count.
func TestForkChannelPruned(t *testing.T) {
	p := newProviderWith(t, Config{Runtime: "runsc", Prestart: []string{agent.Python}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var sb contexts.Sandbox
	sb, err := p.Create(ctx, contexts.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if r := runCode(t, sb.(*Sandbox).Client, agent.Python, "x = 0"); !r.Success {
		t.Fatalf("x = 0: %+v", r.Error)
	}
	src := sb
	for i := 0; i < 4; i++ { // four moved-aside sockets in the source
		ck, c, err := p.ForkCheckpoint(ctx, src.ID())
		if err != nil {
			t.Fatal(err)
		}
		src.Close()
		src = c
		defer p.DropForkCheckpoint(ctx, ck)
		if i < 3 {
			continue
		}
		f, err := p.Create(ctx, contexts.Spec{Memory: ck})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if got := mainText(runCode(t, f.(*Sandbox).Client, agent.Python, "x + 1")); got != "1" {
			t.Fatalf("x + 1 in the fork = %q, want 1", got)
		}
		ents, err := os.ReadDir(filepath.Join(p.rt.StateDir(), "chan", f.ID()))
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) > 3 {
			t.Fatalf("the fork's channel holds %d entries, want a few", len(ents))
		}
	}
	src.Close()
}
