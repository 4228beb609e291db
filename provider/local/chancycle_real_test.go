package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// TestCheckpointCyclesKeepChannelBounded (runsc): one sandbox checkpointed
// and restored 18 times (more than its channel tmpfs has inodes) answers
// after every restore with its memory, and its channel holds a bounded
// number of entries. Before, each restore's agent moved the old socket
// aside and bound a new one: one more inode per wake, until the bind
// failed (ENOSPC) and the wake lost its memory.
func TestCheckpointCyclesKeepChannelBounded(t *testing.T) {
	p := newProviderWith(t, Config{Runtime: "runsc", Prestart: []string{agent.Python}})
	var sb contexts.Sandbox = create(t, p, contexts.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if r, err := sb.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "x = 0"}, nil); err != nil || !r.Success {
		t.Fatalf("x = 0: %+v %v", r, err)
	}
	id := sb.ID()
	chanDir := filepath.Join(p.rt.StateDir(), "chan", id)
	most := 0
	for i := 1; i <= 18; i++ {
		if err := p.Checkpoint(ctx, id); err != nil {
			t.Fatalf("cycle %d: checkpoint: %v", i, err)
		}
		sb.Close()
		var err error
		sb, err = p.Restore(ctx, id)
		if err != nil {
			t.Fatalf("cycle %d: restore: %v", i, err)
		}
		r, err := sb.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "x += 1\nx"}, nil)
		if err != nil || !r.Success || mainResult(r) != itoa(i) {
			t.Fatalf("cycle %d: x after the restore: %+v %v, want %d", i, r, err, i)
		}
		ents, err := os.ReadDir(chanDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) > most {
			most = len(ents)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Logf("cycle %d: %v", i, names)
		}
	}
	sb.Close()
	t.Logf("most entries in the channel over 18 cycles: %d", most)
	if most > 3 {
		t.Fatalf("the channel held %d entries, want a bounded few", most)
	}
}

func itoa(i int) string { return fmt.Sprint(i) }

// TestForkCheckpointsInARow (runsc): one source fork-checkpointed five
// times in a row (it runs on, its gofer the same) answers after each: the
// agent removes the sockets it moved aside only after a release for a
// stop (a new gofer on restore), never under the gofer that may hold them
// (removed on every listen, the host could no longer seal the channel at
// the second fork checkpoint).
func TestForkCheckpointsInARow(t *testing.T) {
	p := newProviderWith(t, Config{Runtime: "runsc", Prestart: []string{agent.Python}})
	var sb contexts.Sandbox = create(t, p, contexts.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if r, err := sb.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "x = 0"}, nil); err != nil || !r.Success {
		t.Fatalf("x = 0: %+v %v", r, err)
	}
	id := sb.ID()
	for i := 1; i <= 5; i++ {
		ck, src, err := p.ForkCheckpoint(ctx, id)
		if err != nil {
			t.Fatalf("fork checkpoint %d: %v", i, err)
		}
		sb.Close()
		sb = src
		if err := p.DropForkCheckpoint(ctx, ck); err != nil {
			t.Fatal(err)
		}
		r, err := sb.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "x += 1\nx"}, nil)
		if err != nil || !r.Success || mainResult(r) != itoa(i) {
			t.Fatalf("fork checkpoint %d: x after it: %+v %v, want %d", i, r, err, i)
		}
	}
	sb.Close()
}
