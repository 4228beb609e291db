package local

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
)

// TestContainment: a fork bomb, a memory bomb and a tmpfs fill each end in
// a clear error, and the same sandbox answers the next call. Under runsc
// a memory bomb ends the whole sandbox instead (see docs/runtime.md): the
// host's memory cgroup OOM-kills gVisor's sentry, which holds all of the
// sandbox's memory; the test checks that it ends cleanly.
func TestContainment(t *testing.T) {
	for _, kind := range []string{"auto", "runsc"} {
		t.Run(kind, func(t *testing.T) { testContainment(t, kind) })
	}
}

func testContainment(t *testing.T, kind string) {
	p := newProvider(t, kind, contexts.Limits{MemoryBytes: 256 << 20, PIDs: 64, DiskBytes: 32 << 20})
	ctx := context.Background()
	c := create(t, p, contexts.Spec{})
	outer := t // owns the sandboxes (a subtest's cleanup would close them)
	alive := func(t *testing.T) {
		t.Helper()
		// The next call works, possibly once the bomb's leftovers are gone.
		deadline := time.Now().Add(20 * time.Second)
		for {
			r, err := c.RunCode(ctx, agentRun("python", "1+1"), nil)
			if err == nil && mainText(r) == "2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox unusable after the bomb: %+v, %v", r, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Processes the bomb left behind may hold the task limit a while
		// longer: a new process is refused (resource_exhausted) until then.
		for {
			r, err := c.Exec(ctx, agent.ExecParams{Shell: "echo ok"}, nil)
			if err == nil && r.Stdout == "ok\n" {
				break
			}
			if err != nil && !errors.Is(err, errdefs.ErrResourceExhausted) {
				t.Fatalf("exec after the bomb: %v", err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("exec after the bomb: %+v, %v", r, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	t.Run("fork bomb", func(t *testing.T) {
		start := time.Now()
		// The leader sleeps, so the call runs into its timeout and the
		// agent kills the whole process group. (A bomb whose leader exits
		// first leaves an orphaned group behind, as any background job
		// would: it keeps the sandbox's task limit full until the sandbox
		// ends, and would starve the subtests below.)
		r, err := c.Exec(ctx, agent.ExecParams{Shell: "bomb() { bomb | bomb & }; bomb; sleep 60", TimeoutMs: 3000}, nil)
		if err == nil {
			t.Logf("fork bomb: exit %d, timed out %v, after %v", r.ExitCode, r.TimedOut, time.Since(start))
		}
		// bash retries a failed fork a few times, then reports it; the
		// call either times out or ends with that error.
		if kind == "runsc" {
			// The bomb's fork errors ("Cannot fork") come after the call
			// returned; once it is gone, check that the task limit (gVisor
			// enforces RLIMIT_NPROC) is the sandbox's.
			alive(t)
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				r, err := c.Exec(ctx, agent.ExecParams{Shell: "ulimit -u"}, nil)
				if err == nil && r.Stdout == "64\n" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("ulimit -u under runsc: %+v, %v", r, err)
				}
			}
		} else if err != nil || !r.TimedOut || !strings.Contains(r.Stderr, "Resource temporarily unavailable") {
			t.Errorf("fork bomb: want a timed-out call whose forks hit the pids limit, got %+v, %v", r, err)
		}
		alive(t)
	})

	t.Run("memory bomb", func(t *testing.T) {
		r, err := c.RunCode(ctx, agentRun("python", "x = b'a' * (1 << 30)\nlen(x)"), nil)
		if err == nil {
			t.Logf("memory bomb: exit %d, error %+v, kernel restarted %v", r.ExitCode, r.Error, r.KernelRestarted)
		}
		if err == nil && r.Success {
			t.Errorf("memory bomb succeeded: %+v", r)
		}
		if kind == "runsc" {
			deadline := time.Now().Add(10 * time.Second)
			for {
				st, err := p.Runtime().State(ctx, c.ID())
				if err == nil && st.Status == runtime.StatusStopped {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("runsc sandbox after the memory bomb: %+v, %v; want stopped", st, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := p.Destroy(ctx, c.ID()); err != nil {
				t.Fatal(err)
			}
			c = create(outer, p, contexts.Spec{})
		}
		alive(t)
		st, err := p.Runtime().Stats(ctx, c.ID())
		if err != nil || st.MemoryBytes > 256<<20 {
			t.Errorf("stats after memory bomb: %+v, %v", st, err)
		}
	})

	t.Run("tmpfs fill", func(t *testing.T) {
		r := sh(t, c, "dd if=/dev/zero of=$HOME/big bs=1M count=100")
		t.Logf("tmpfs fill: exit %d: %s", r.ExitCode, r.Stderr)
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "No space left on device") {
			t.Errorf("filling /home/user: exit %d, %q", r.ExitCode, r.Stderr)
		}
		// As after the bombs, a new process may be refused for a moment
		// (the pids limit is small here): retry only that.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			r, err := c.Exec(ctx, agent.ExecParams{Shell: "rm -f $HOME/big && df -k /tmp | tail -1", TimeoutMs: 30000}, nil)
			if err == nil && r.ExitCode == 0 {
				break
			}
			if (err != nil && !errors.Is(err, errdefs.ErrResourceExhausted)) || time.Now().After(deadline) {
				t.Fatalf("rm after the fill: %+v, %v", r, err)
			}
			if err == nil {
				t.Fatalf("rm after the fill: %+v", r)
			}
		}
		alive(t)
	})
}
