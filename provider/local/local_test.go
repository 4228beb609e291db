package local

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

func TestCreateRunDestroy(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			p := newProvider(t, kind, contexts.Limits{})
			if p.Runtime().Name() != kind {
				t.Fatalf("runtime = %s", p.Runtime().Name())
			}
			ctx := context.Background()
			c := create(t, p, contexts.Spec{Labels: map[string]string{"tenant": "t1"}})
			r := runCode(t, c, "python", "1+1")
			if !r.Success || mainText(r) != "2" {
				t.Fatalf("python 1+1 = %+v", r)
			}
			if got := sh(t, c, "id -u"); got.Stdout != "1000\n" {
				t.Errorf("id -u: %+v", got)
			}
			// The agent's own runtime settings (agent.RuntimeEnv) stay the
			// agent's: user code does not inherit them.
			if got := sh(t, c, "echo ${GOMAXPROCS-unset}"); got.Stdout != "unset\n" {
				t.Errorf("the agent's GOMAXPROCS reached user code: %+v", got)
			}
			ids, err := p.List(ctx)
			if err != nil || !slices.Contains(ids, c.ID()) {
				t.Errorf("list = %v, %v; want %s", ids, err, c.ID())
			}
			st, err := p.Runtime().State(ctx, c.ID())
			if err != nil || st.Labels["tenant"] != "t1" {
				t.Errorf("state = %+v, %v", st, err)
			}
			sh(t, c, "head -c 3000000 /dev/zero > ~/f")
			u, err := p.Usage(ctx, c.ID())
			if err != nil || u.MemoryBytes == 0 || u.PIDs == 0 || u.DiskBytes < 3000000 || u.DiskBytes > 64<<20 {
				t.Errorf("usage = %+v, %v", u, err)
			}
			if err := p.Destroy(ctx, c.ID()); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Attach(ctx, c.ID()); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("attach after destroy: %v, want not_found", err)
			}
			if err := p.Destroy(ctx, c.ID()); err != nil {
				t.Errorf("destroy twice: %v", err)
			}
			ids, _ = p.List(ctx)
			if slices.Contains(ids, c.ID()) {
				t.Errorf("list after destroy still has %s", c.ID())
			}
		})
	}
}

func TestAutoPicksCrun(t *testing.T) {
	p := newProvider(t, "auto", contexts.Limits{})
	if p.Runtime().Name() != "crun" {
		t.Errorf("auto picked %s, want crun (installed and working here)", p.Runtime().Name())
	}
}

// TestRestart creates a sandbox from another process (a "daemon" that then
// exits), reattaches by id from a fresh Provider here, and finds the kernel
// state intact: nothing ties the sandbox to the process that made it.
func TestRestart(t *testing.T) {
	for _, kind := range []string{"auto", "runc", "runsc"} {
		t.Run(kind, func(t *testing.T) { testRestart(t, kind) })
	}
}

func testRestart(t *testing.T, kind string) {
	p := newProvider(t, kind, contexts.Limits{})
	ctx := context.Background()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"="+p.stateDir, helperRuntimeEnv+"="+kind, AgentEnv+"="+testenv.AgentBinary(t))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper daemon: %v", err)
	}
	id := strings.TrimSpace(string(out))

	ids, err := p.List(ctx)
	if err != nil || !slices.Contains(ids, id) {
		t.Fatalf("fresh provider lists %v, %v; want %s", ids, err, id)
	}
	sb, err := p.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sb.RunCode(ctx, agentRun("python", "x"), nil)
	if err != nil || mainText(r) != "42" {
		t.Fatalf("x after reattach = %+v, %v", r, err)
	}
	// Drop this connection too, and attach once more.
	sb.Close()
	sb, err = p.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if r, err := sb.RunCode(ctx, agentRun("python", "x + 1"), nil); err != nil || mainText(r) != "43" {
		t.Fatalf("x + 1 after second attach = %+v, %v", r, err)
	}
	if _, err := p.Attach(ctx, "sb-000000000000"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("attach unknown: %v", err)
	}
	if _, err := p.Attach(ctx, "../etc"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("attach bad id: %v", err)
	}
}

// TestAttachStopped: a sandbox whose agent died is not found (and Destroy
// cleans it).
func TestAttachStopped(t *testing.T) {
	p := newProvider(t, "auto", contexts.Limits{})
	ctx := context.Background()
	c := create(t, p, contexts.Spec{})
	c.Close()
	if err := p.Stop(ctx, c.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Attach(ctx, c.ID()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("attach stopped: %v, want not_found", err)
	}
	if err := p.Destroy(ctx, c.ID()); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentCreate fills a pool's worth of sandboxes at once.
func TestConcurrentCreate(t *testing.T) {
	p := newProvider(t, "auto", contexts.Limits{})
	ctx := context.Background()
	const n = 6
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			sb, err := p.Create(ctx, contexts.Spec{})
			if err != nil {
				errs <- err
				return
			}
			defer sb.Close()
			r, err := sb.RunCode(ctx, agentRun("python", "1+1"), nil)
			if err == nil && mainText(r) != "2" {
				err = errors.New("1+1 != 2")
			}
			if derr := p.Destroy(ctx, sb.ID()); err == nil {
				err = derr
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if ids, _ := p.List(ctx); len(ids) != 0 {
		t.Errorf("left behind: %v", ids)
	}
}

// TestPrestart: with Prestart the python kernel runs before the first call.
func TestPrestart(t *testing.T) {
	p := newProvider(t, "auto", contexts.Limits{}, "python")
	c := create(t, p, contexts.Spec{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := sh(t, c, "ps -e -o comm="); strings.Contains(r.Stdout, "python3") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no python kernel after boot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := runCode(t, c, "python", "1+1"); mainText(r) != "2" || r.KernelRestarted {
		t.Fatalf("1+1 = %+v", r)
	}
}

// TestSpecEnv: the sandbox's environment (contexts.Spec.Env) is the base
// environment of every exec and kernel; per-call env still wins, and the
// variables do not reach the agent's own settings.
func TestSpecEnv(t *testing.T) {
	p := newProvider(t, "auto", contexts.Limits{})
	c := create(t, p, contexts.Spec{Env: map[string]string{"FOO": "bar", "LANG": "en_US.UTF-8", "GOMAXPROCS": "7"}})
	if r := runCode(t, c, "python", "import os\nos.environ['FOO']"); mainText(r) != "'bar'" {
		t.Errorf("python FOO: %+v", r)
	}
	if r := runCode(t, c, "bash", "echo $FOO $LANG"); r.Stdout != "bar en_US.UTF-8\n" {
		t.Errorf("bash FOO: %+v", r)
	}
	if r := runCode(t, c, "javascript", "process.env.FOO"); mainText(r) != "'bar'" {
		t.Errorf("javascript FOO: %+v", r)
	}
	if got := sh(t, c, "echo $FOO; echo $GOMAXPROCS; env | grep -c SANDLOT_ENV_"); got.Stdout != "bar\n7\n0\n" {
		t.Errorf("exec env: %+v", got)
	}
	e, err := c.Exec(context.Background(), agent.ExecParams{Shell: "echo $FOO", Env: map[string]string{"FOO": "call"}}, nil)
	if err != nil || e.Stdout != "call\n" {
		t.Errorf("per-call env: %+v %v", e, err)
	}
	if _, err := p.Create(context.Background(), contexts.Spec{Env: map[string]string{"A=B": "x"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad env name: %v, want invalid_argument", err)
	}
}

// TestDefaultsAndReaping checks, on a real container, the default limits
// as the kernel enforces them (memory 2 GiB without swap, 256 pids, one
// CPU, 512 MiB tmpfs) and that the agent as PID 1 reaps orphaned children.
func TestDefaultsAndReaping(t *testing.T) {
	p := newProvider(t, "auto", contexts.Limits{})
	c := create(t, p, contexts.Spec{})
	read := func(parts ...string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(append([]string{"/sys/fs/cgroup"}, parts...)...))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	id := c.ID()
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil { // cgroup v2 host
		if got := read("sandlot", id, "memory.max"); got != "2147483648" {
			t.Errorf("memory.max = %s", got)
		}
		if got := read("sandlot", id, "pids.max"); got != "256" {
			t.Errorf("pids.max = %s", got)
		}
		if got := read("sandlot", id, "cpu.max"); got != "100000 100000" {
			t.Errorf("cpu.max = %s", got)
		}
	} else {
		if got := read("memory", "sandlot", id, "memory.limit_in_bytes"); got != "2147483648" {
			t.Errorf("memory.limit_in_bytes = %s", got)
		}
		if got := read("pids", "sandlot", id, "pids.max"); got != "256" {
			t.Errorf("pids.max = %s", got)
		}
		if got := read("cpu", "sandlot", id, "cpu.cfs_quota_us"); got != "100000" {
			t.Errorf("cpu.cfs_quota_us = %s", got)
		}
	}
	if got := sh(t, c, "df -k --output=size /home/user /tmp | tail -n +2 | tr -d ' '"); got.Stdout != "524288\n524288\n" {
		t.Errorf("tmpfs sizes: %+v", got)
	}

	// Orphans reparent to the agent (PID 1 of the container) and must be
	// reaped: no zombie may be left once they exit.
	if got := sh(t, c, "for i in 1 2 3 4 5; do (sleep 0.2 &); done; sh -c 'sleep 0.1 & exec true'"); got.ExitCode != 0 {
		t.Fatalf("spawn orphans: %+v", got)
	}
	time.Sleep(600 * time.Millisecond) // the orphans have exited by now
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := sh(t, c, "cat /proc/[0-9]*/stat 2>/dev/null | awk '$3 == \"Z\"' | wc -l; ps -e -o stat= | grep -c Z || true")
		if got.Stdout == "0\n0\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombies left in the sandbox: %q", got.Stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSpecPrestart: Spec.Prestart (how the manager's warm pool asks for a
// booted python) starts the kernel at boot and is not user environment.
func TestSpecPrestart(t *testing.T) {
	p := newProvider(t, "auto", contexts.Limits{})
	c := create(t, p, contexts.Spec{Prestart: []string{"python"}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := sh(t, c, "ps -e -o comm="); strings.Contains(r.Stdout, "python3") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Spec.Prestart: no python kernel after boot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := sh(t, c, "env"); strings.Contains(r.Stdout, "PRESTART") {
		t.Errorf("the prestart request leaked into user env: %q", r.Stdout)
	}
}
