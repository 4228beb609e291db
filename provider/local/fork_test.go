package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// TestForkWithMemory (runsc): a python variable of the source (x = 41) is
// in two forks restored from one fork checkpoint (x + 1 answers 42); the
// source runs on with its x, and what a fork sets after the fork is its
// own. The checkpoint is gone once dropped. Attack: the source's key,
// which the fork's restored agent held, no longer opens the fork, and the
// fork's key does not open the source (rekeyOff shows the attack succeed
// without the rekey).
func TestForkWithMemory(t *testing.T) {
	p := newProviderWith(t, Config{Runtime: "runsc", Prestart: []string{agent.Python}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sb, err := p.Create(ctx, contexts.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	srcID := sb.ID()
	if r := runCode(t, sb.(*Sandbox).Client, agent.Python, "x = 41"); !r.Success {
		t.Fatalf("x = 41: %+v", r.Error)
	}
	start := time.Now()
	ck, src, err := p.ForkCheckpoint(ctx, srcID)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	saved := time.Since(start)
	var forks []*agent.Client
	var took []time.Duration
	for range 2 {
		start := time.Now()
		f, err := p.Create(ctx, contexts.Spec{MemoryCheckpoint: ck})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		c := f.(*Sandbox).Client
		r := runCode(t, c, agent.Python, "x + 1")
		took = append(took, time.Since(start))
		if got := mainText(r); got != "42" {
			t.Fatalf("x + 1 in the fork = %q (%+v), want 42", got, r.Error)
		}
		forks = append(forks, c)
	}
	t.Logf("fork checkpoint %v; each fork to its first result %v", saved, took)
	// A fork whose sandbox would differ from the source's (here its
	// memory limit) is refused by sandlot's comparison before runsc runs,
	// and leaves nothing behind.
	before, _ := p.List(ctx)
	if _, err := p.Create(ctx, contexts.Spec{MemoryCheckpoint: ck, Limits: contexts.Limits{MemoryBytes: 1 << 30}}); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "linux.resources.memory") {
		t.Fatalf("a fork with another memory limit: %v, want failed_precondition naming the field", err)
	}
	if after, _ := p.List(ctx); len(after) != len(before) {
		t.Fatalf("a refused fork left a sandbox: %v, was %v", after, before)
	}
	if err := p.DropForkCheckpoint(ctx, ck); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.forksDir(), ck)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the fork checkpoint is still on disk: %v", err)
	}
	sc := src.(*Sandbox).Client
	runCode(t, forks[0], agent.Python, "y = 'fork'")
	if got := mainText(runCode(t, sc, agent.Python, "x")); got != "41" {
		t.Fatalf("the source's x after the fork = %q, want 41", got)
	}
	if r := runCode(t, sc, agent.Python, "y"); r.Success {
		t.Fatalf("the source sees the fork's y: %+v", r)
	}
	if r := runCode(t, forks[1], agent.Python, "y"); r.Success {
		t.Fatalf("one fork sees the other's y: %+v", r)
	}

	// The keys: each sandbox opens with its own only.
	srcKey, _ := p.rt.Secret(srcID)
	for _, f := range forks {
		fid := f.ID()
		fKey, _ := p.rt.Secret(fid)
		if string(fKey) == string(srcKey) {
			t.Fatal("the fork's bundle has the source's key")
		}
		if c, err := p.connect(ctx, fid, srcKey, false); err == nil {
			c.Close()
			t.Errorf("the source's key opens fork %s", fid)
		} else if !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Errorf("the source's key on fork %s: %v, want permission_denied", fid, err)
		}
		if c, err := p.connect(ctx, srcID, fKey, false); err == nil {
			c.Close()
			t.Errorf("fork %s's key opens the source", fid)
		}
		c, err := p.connect(ctx, fid, fKey, false)
		if err != nil {
			t.Fatalf("fork %s's own key: %v", fid, err)
		}
		c.Close()
	}
	// A checkpoint name that is not one is not found, never a path.
	for _, bad := range []string{"../bundles", "fk-../../x", "fk-00000000000000000000000000"} {
		if _, err := p.Create(ctx, contexts.Spec{MemoryCheckpoint: bad}); !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Errorf("Memory %q: %v", bad, err)
		}
	}
	// A checkpoint an earlier process left goes at the next start.
	stale := filepath.Join(p.forksDir(), "fk-abcdefghijklmnopqrstuvwxyz")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	p.dropStaleForks()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stale fork checkpoint stays: %v", err)
	}
}
