package server_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/server"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestReadyHoldsRequests: with Config.Ready open the agent listens (and
// says so through Config.Listening), takes connections and answers pings,
// but answers no other request (none could start user code) until Ready
// is closed.
func TestReadyHoldsRequests(t *testing.T) {
	ready := make(chan struct{})
	listening := make(chan struct{})
	ctx, c := startInProcess(t, t.TempDir(), server.Config{Ready: ready, Listening: func() { close(listening) }})
	select {
	case <-listening:
	default:
		t.Fatal("Listening was not called before the agent took a connection")
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := c.Ping(pctx); err != nil {
		t.Fatalf("ping before Ready: %v", err)
	}
	res := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, agent.ExecParams{Shell: "echo ran"}, nil)
		res <- err
	}()
	select {
	case err := <-res:
		t.Fatalf("an exec was answered before Ready (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(ready)
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("exec after Ready: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer after Ready")
	}
}

// TestReadyHoldsCells: a run_code cell (a kernel's) and an sh run neither
// run nor are answered until Ready is closed: user code could fork-bomb
// the sandbox before the agent's thread reserve is made. Whatever moves
// where the wait happens (the request, or only its cell) must keep this.
func TestReadyHoldsCells(t *testing.T) {
	for _, lang := range []string{agent.Bash, agent.Sh} {
		t.Run(lang, func(t *testing.T) {
			dir := t.TempDir()
			ready := make(chan struct{})
			ctx, c := startInProcess(t, dir, server.Config{Ready: ready})
			marker := filepath.Join(dir, "ran")
			res := make(chan error, 1)
			go func() {
				r, err := c.RunCode(ctx, agent.RunCodeParams{Language: lang, Code: "touch " + marker + " && echo ran"}, nil)
				if err == nil && r.Stdout != "ran\n" {
					err = fmt.Errorf("stdout %q", r.Stdout)
				}
				res <- err
			}()
			select {
			case err := <-res:
				t.Fatalf("a %s cell was answered before Ready (err %v)", lang, err)
			case <-time.After(500 * time.Millisecond):
			}
			if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the %s cell ran before Ready (stat: %v)", lang, err)
			}
			close(ready)
			select {
			case err := <-res:
				if err != nil {
					t.Fatalf("%s cell after Ready: %v", lang, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no answer after Ready")
			}
		})
	}
}

// TestReadyStartsNoKernel: a run_code that arrives before Ready starts no
// interpreter, because every interpreter runs code the sandbox's creator
// controls as it starts (here bash's BASH_ENV, from the sandbox's
// environment, with a command substitution): a fork bomb there could fill
// the pids limit before the agent's thread reserve stands. Hold is still
// called (the reserve is made once a request waits), and after Ready the
// kernel starts and runs both the BASH_ENV and the cell.
func TestReadyStartsNoKernel(t *testing.T) {
	dir := t.TempDir()
	envMarker := filepath.Join(dir, "bash_env_ran")
	t.Setenv(agent.EnvPrefix+"BASH_ENV", "$(touch "+envMarker+")")
	ready := make(chan struct{})
	var held atomic.Int32
	ctx, c := startInProcess(t, dir, server.Config{Ready: ready, Hold: func() { held.Add(1) }})
	marker := filepath.Join(dir, "ran")
	res := make(chan error, 1)
	go func() {
		r, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Bash, Code: "touch " + marker + " && echo ran"}, nil)
		if err == nil && r.Stdout != "ran\n" {
			err = fmt.Errorf("stdout %q", r.Stdout)
		}
		res <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for held.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Hold was not called for a run_code waiting for Ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Whatever the request started before Ready has had Hold's call to
	// start by; watch a while longer for a late one.
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-res:
			t.Fatalf("the cell was answered before Ready (err %v)", err)
		default:
		}
		if pid := bashKernelChild(); pid != "" {
			t.Fatalf("a bash kernel (pid %s) started before Ready", pid)
		}
		for _, m := range []string{envMarker, marker} {
			if _, err := os.Stat(m); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s exists before Ready (stat: %v)", filepath.Base(m), err)
			}
		}
	}
	close(ready)
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("cell after Ready: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer after Ready")
	}
	// The environment reached the kernel: the check above could fail.
	if _, err := os.Stat(envMarker); err != nil {
		t.Fatalf("BASH_ENV did not run after Ready: %v", err)
	}
}

// TestReadyPrestartWaits: Config.Prestart's kernels start only once Ready
// is closed, for the reason TestReadyStartsNoKernel gives.
func TestReadyPrestartWaits(t *testing.T) {
	dir := t.TempDir()
	envMarker := filepath.Join(dir, "bash_env_ran")
	t.Setenv(agent.EnvPrefix+"BASH_ENV", "$(touch "+envMarker+")")
	ready := make(chan struct{})
	ctx, c := startInProcess(t, dir, server.Config{Ready: ready, Prestart: []string{agent.Bash}})
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := c.Ping(pctx); err != nil {
		t.Fatalf("ping before Ready: %v", err)
	}
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if pid := bashKernelChild(); pid != "" {
			t.Fatalf("a prestarted bash kernel (pid %s) started before Ready", pid)
		}
		if _, err := os.Stat(envMarker); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("BASH_ENV ran before Ready (stat: %v)", err)
		}
	}
	close(ready)
	deadline := time.Now().Add(30 * time.Second)
	for bashKernelChild() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the prestarted bash kernel did not start after Ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bashKernelChild returns the pid of a child of this process (the
// in-process agent) running the bash kernel's driver, or "".
func bashKernelChild() string {
	for _, pid := range testenv.ChildPIDs(os.Getpid()) {
		b, err := os.ReadFile("/proc/" + pid + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if len(argv) >= 4 && filepath.Base(argv[0]) == "bash" && argv[1] == "--noprofile" &&
			argv[3] == "-c" && strings.Contains(strings.Join(argv[4:], " "), "__sandlot_code") {
			return pid
		}
	}
	return ""
}

// startInProcess serves an agent of cfg in this process, its socket and
// home in dir, and dials it while it starts (it takes connections before
// Ready). The context ends and the agent stops at the test's end, after
// the client is closed.
func startInProcess(t *testing.T, dir string, cfg server.Config) (context.Context, *agent.Client) {
	t.Helper()
	cfg.Socket, cfg.Home = filepath.Join(dir, "agent.sock"), filepath.Join(dir, "home")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.New(cfg).Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var c *agent.Client
	var err error
	for i := 0; i < 200; i++ {
		if c, err = agent.Dial(ctx, cfg.Socket, agent.ClientConfig{}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the agent takes no connection: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c
}

// TestReadyCancelledCallDoesNotRun: a call cancelled while it waits for
// Ready does not run once Ready is closed. The cancel arrives on the
// connection right behind the call; before, the call was known to the
// cancel only once it started, so this cancel was dropped and the call
// ran after Ready, with no one waiting for it.
func TestReadyCancelledCallDoesNotRun(t *testing.T) {
	dir := t.TempDir()
	ready := make(chan struct{})
	waiting := make(chan struct{}) // Hold: a request waits for Ready
	var once sync.Once
	ctx, c := startInProcess(t, dir, server.Config{Ready: ready, Hold: func() { once.Do(func() { close(waiting) }) }})
	marker := filepath.Join(dir, "ran")
	cctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := c.Exec(cctx, agent.ExecParams{Shell: "touch " + marker}, nil)
		res <- err
	}()
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the exec did not reach the agent")
	}
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled exec: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled exec did not return")
	}
	// The agent reads a connection's frames in order and answers a ping
	// as it reads it: once the ping is answered, the cancel was read.
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	close(ready)
	// A call after Ready runs; by its end a call that was not cancelled
	// would have run too (it was taken first): give it two seconds more.
	if r, err := c.Exec(ctx, agent.ExecParams{Shell: "sleep 2; echo ok"}, nil); err != nil || r.Stdout != "ok\n" {
		t.Fatalf("exec after Ready: %+v, %v", r, err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the call cancelled before Ready ran after it (stat: %v)", err)
	}
}
