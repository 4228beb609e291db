package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// collector gathers one call's output events.
type collector struct {
	mu     sync.Mutex
	events []agent.OutputEvent
}

func (c *collector) add(ev agent.OutputEvent) {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
}

func (c *collector) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, ev := range c.events {
		if ev.Stream == agent.Stdout {
			b.WriteString(ev.Data)
		}
	}
	return b.String()
}

// TestExecDetach drops the connection of a detached exec, as a host
// restart does: the process runs on, its output meanwhile is kept, and a
// new connection attaches to it, gets that output, the rest, and the
// result; it can be listed and given input before. A process without
// Detach dies with its connection; a cancel kills a detached one too.
func TestExecDetach(t *testing.T) {
	a := agenttest.Start(t)
	first := a.Dial(t)
	ctx := context.Background()

	pidc := make(chan int, 1)
	go first.Exec(ctx, agent.ExecParams{
		Shell: `sleep 0.5; for i in 1 2 3; do echo tick-$i; sleep 0.2; done; read line; echo "got:$line"; exit 7`, KeepStdin: true,
		Stream: true, Detach: true, TimeoutMs: -1,
	}, func(ev agent.OutputEvent) {
		if ev.Stream == agent.Start {
			pidc <- ev.PID
		}
	})
	pid := <-pidc
	plain := make(chan int, 1)
	go first.Exec(ctx, agent.ExecParams{Argv: []string{"sleep", "30"}, Stream: true, TimeoutMs: -1}, func(ev agent.OutputEvent) {
		if ev.Stream == agent.Start {
			plain <- ev.PID
		}
	})
	plainPID := <-plain
	first.Close()                       // the host restarts
	time.Sleep(1500 * time.Millisecond) // it prints while no one is attached

	second := a.Dial(t)
	// The plain process dies with its connection, as the agent sees the
	// drop: wait for that (bounded well below its sleep's 30 s).
	var procs []agent.Process
	var listed map[int]bool
	testenv.Until(20*time.Second, func() bool {
		var err error
		if procs, err = second.Processes(ctx); err != nil {
			t.Fatal(err)
		}
		listed = map[int]bool{}
		for _, p := range procs {
			listed[p.PID] = true
		}
		return !listed[plainPID]
	})
	if !listed[pid] || listed[plainPID] {
		t.Fatalf("processes after the connection dropped: %+v; want the detached %d, not %d", procs, pid, plainPID)
	}
	if err := second.Stdin(ctx, agent.StdinParams{PID: pid, Data: "hello\n"}); err != nil {
		t.Fatal(err)
	}
	var got collector
	res, err := second.Attach(ctx, agent.AttachParams{PID: pid}, got.add)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || res.PID != pid {
		t.Fatalf("result %+v, want exit 7", res)
	}
	if want := "tick-1\ntick-2\ntick-3\ngot:hello\n"; got.text() != want {
		t.Fatalf("attached output %q, want %q", got.text(), want)
	}
	if ev := got.events[0]; ev.Stream != agent.Start || ev.PID != pid {
		t.Fatalf("first event %+v, want start", ev)
	}
	// The result was taken: a second attach finds nothing.
	if _, err := second.Attach(ctx, agent.AttachParams{PID: pid}, func(agent.OutputEvent) {}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second attach: %v, want not_found", err)
	}

	// A cancel (not a dropped connection) kills a detached exec.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := second.Exec(cctx, agent.ExecParams{Argv: []string{"sleep", "30"}, Detach: true, TimeoutMs: -1}, nil); err == nil {
		t.Fatal("a cancelled exec returned a result")
	}
	// Killed once the agent reads the cancel: bounded well below the
	// sleep's own 30 s.
	if !testenv.Until(20*time.Second, func() bool { procs, _ := second.Processes(ctx); return len(procs) == 0 }) {
		procs, _ := second.Processes(ctx)
		t.Fatalf("a cancelled detached exec still runs: %+v", procs)
	}
}

// TestExecDetachBoundsOutput: while no one is attached, a detached
// process's output is kept up to agent.DetachedOutput, the oldest dropped,
// and the attach says how much is missing where. (The agent streams at
// most ExecParams.MaxOutput, 1 MiB, per stream in any case.)
func TestExecDetachBoundsOutput(t *testing.T) {
	a := agenttest.Start(t)
	first := a.Dial(t)
	ctx := context.Background()
	done := filepath.Join(a.Home, "printed")
	pidc := make(chan int, 1)
	go first.Exec(ctx, agent.ExecParams{
		Shell:  `sleep 0.3; head -c 800000 /dev/zero | tr '\0' y >&2; head -c 800000 /dev/zero | tr '\0' x; echo; echo the-tail; touch ` + done + `; read x`,
		Stream: true, Detach: true, TimeoutMs: -1, KeepStdin: true,
	}, func(ev agent.OutputEvent) {
		if ev.Stream == agent.Start {
			pidc <- ev.PID
		}
	})
	pid := <-pidc
	first.Close()
	second := a.Dial(t)
	deadline := time.Now().Add(30 * time.Second)
	for !fileExists(done) {
		if time.Now().After(deadline) {
			t.Fatal("the process never printed its tail")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var got collector
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := second.Attach(actx, agent.AttachParams{PID: pid}, got.add)
	cancel()
	if err == nil {
		t.Fatal("attach ended though the process waits for input")
	}
	out, total := got.text(), 0
	for _, ev := range got.events {
		total += len(ev.Data)
	}
	// 1.6 MB were written while no one was attached.
	if !strings.HasSuffix(out, "the-tail\n") || total > agent.DetachedOutput+64<<10 {
		t.Fatalf("attach delivered %d bytes (tail %q); want the tail and at most about %d", total, out[max(0, len(out)-20):], agent.DetachedOutput)
	}
	note := false
	for _, ev := range got.events {
		note = note || ev.Stream == agent.Stderr && strings.Contains(ev.Data, "bytes of output dropped here")
	}
	if !note {
		t.Fatal("no notice of the dropped output")
	}
	if err := second.Stdin(ctx, agent.StdinParams{PID: pid, Data: "\n"}); err != nil {
		t.Fatal(err)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
