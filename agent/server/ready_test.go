package server_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// TestReadyStartsKernelFirst: a run_code that arrives before Ready starts
// its kernel (not its cell) and then calls Config.Hold, so the agent's
// thread reserve is made while the kernel boots instead of before the
// request is read; the cell still waits for Ready.
func TestReadyStartsKernelFirst(t *testing.T) {
	dir := t.TempDir()
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
	for held.Load() == 0 || !kernelChild() {
		select {
		case err := <-res:
			t.Fatalf("the cell was answered before Ready (err %v)", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("before Ready: Hold called %d times, a bash kernel started: %v", held.Load(), kernelChild())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the cell ran before Ready (stat: %v)", err)
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
}

// kernelChild says whether this process has a bash child (the in-process
// agent's bash kernel).
func kernelChild() bool {
	for _, pid := range testenv.ChildPIDs(os.Getpid()) {
		if b, err := os.ReadFile("/proc/" + pid + "/comm"); err == nil && strings.TrimSpace(string(b)) == "bash" {
			return true
		}
	}
	return false
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
