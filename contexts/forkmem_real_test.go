package contexts_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/runtime/oci"
)

// TestRealForkMemory (runsc): a fork onto a path carries the source's
// memory (x = 41 in the source, x + 1 answers 42 in the fork; the result
// says Memory), the source answers on with its x, a variable the fork sets
// is not the source's, and a file the fork writes is owned on the host by
// the fork's id range, not the source's. E2B's batch (ForkSnapshot, then
// one create per fork) restores one checkpoint twice, and the checkpoint
// is gone once the request is done.
func TestRealForkMemory(t *testing.T) {
	e := newSuspendEnvOn(t, "runsc")
	a := ident("t1", "forkmem", "main")
	res := e.exec(a, "x = 41\nopen('/home/user/before.txt', 'w').write('before')")
	if !res.Success {
		t.Fatalf("setup: %+v", res)
	}
	cid, sid := res.ContextID, res.SandboxID
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	start := time.Now()
	fr, err := e.m.Fork(ctx, "t1", cid, "branch")
	if err != nil {
		t.Fatal(err)
	}
	b := ident("t1", "forkmem", "branch")
	got := e.exec(b, "x + 1")
	t.Logf("fork with memory to its first result %v", time.Since(start))
	if !fr.Memory {
		t.Fatalf("the fork says memory %v, want true", fr.Memory)
	}
	if mainResult(got) != "42" || got.SandboxID == sid {
		t.Fatalf("x + 1 in the fork = %q on %s (%+v), want 42 on a sandbox of its own", mainResult(got), got.SandboxID, got.Error)
	}
	fid := got.SandboxID
	if r := e.exec(b, "open('/home/user/before.txt').read()"); mainResult(r) != "'before'" {
		t.Fatalf("the source's file in the fork: %+v", r)
	}
	if r := e.exec(a, "x"); mainResult(r) != "41" || r.SandboxID != sid {
		t.Fatalf("the source after the fork: %q on %s (%+v), want 41 on %s", mainResult(r), r.SandboxID, r.Error, sid)
	}
	e.exec(b, "y = 'fork'\nopen('/home/user/fork.txt', 'w').write('fork')")
	if r := e.exec(a, "y"); r.Success {
		t.Fatalf("the source sees the fork's y: %+v", r)
	}
	// The fork's file on the host: in its writable layer, owned by its range.
	rangeOf := func(id string) (base, size uint32) {
		var cfg struct {
			Linux struct {
				UIDMappings []struct{ HostID, Size uint32 } `json:"uidMappings"`
			} `json:"linux"`
		}
		b, err := os.ReadFile(filepath.Join(e.dir, "bundles", id, "config.json"))
		if err == nil {
			err = json.Unmarshal(b, &cfg)
		}
		if err != nil || len(cfg.Linux.UIDMappings) != 1 {
			t.Fatalf("id range of %s: %v", id, err)
		}
		return cfg.Linux.UIDMappings[0].HostID, cfg.Linux.UIDMappings[0].Size
	}
	fb, fs := rangeOf(fid)
	sb, _ := rangeOf(sid)
	fi, err := os.Stat(filepath.Join(oci.DefaultShareDir, "roots", fid, "upper", "home", "user", "fork.txt"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid < fb || st.Uid >= fb+fs || st.Gid < fb || st.Gid >= fb+fs {
		t.Fatalf("the fork's file is owned by %d:%d, want the fork's range from %d (the source's from %d)", st.Uid, st.Gid, fb, sb)
	}

	// E2B's batch: one checkpoint, two forks, the checkpoint gone after.
	call, done := context.WithCancel(ctx)
	src, info, err := e.m.ForkSnapshot(call, "t1", cid)
	if err != nil {
		t.Fatal(err)
	}
	if info.MemoryCheckpoint == "" {
		t.Fatal("ForkSnapshot made no memory checkpoint on runsc")
	}
	for i, conv := range []string{"batch-1", "batch-2"} {
		id := ident("t1", conv, contexts.DefaultPath)
		if _, err := e.m.GetOrCreate(call, id, contexts.CreateOptions{Template: info.ID, Network: src.Network, MemoryCheckpoint: info.MemoryCheckpoint}); err != nil {
			t.Fatal(err)
		}
		if r := e.exec(id, "x + 1"); mainResult(r) != "42" {
			t.Fatalf("batch fork %d: x + 1 = %q (%+v)", i, mainResult(r), r.Error)
		}
	}
	done()
	forks := filepath.Join(e.dir, "forks")
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		ents, _ := os.ReadDir(forks)
		if len(ents) == 0 {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("the fork checkpoints are still on disk after the request: %v", ents)
		}
	}
	if r := e.exec(a, "x"); mainResult(r) != "41" {
		t.Fatalf("the source after two fork checkpoints: %+v", r)
	}
}
