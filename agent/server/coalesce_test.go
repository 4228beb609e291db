package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
)

// events collects a call's output events; safe for the client's reader.
type events struct {
	mu  sync.Mutex
	evs []agent.OutputEvent
}

func (e *events) add(ev agent.OutputEvent) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

// of returns the data of the events of stream.
func (e *events) of(stream string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs {
		if ev.Stream == stream {
			out = append(out, ev.Data)
		}
	}
	return out
}

// TestOutputCoalescedIntoOneEvent: the writes a cell or a process makes
// within the output window reach the host as one event, and that event
// comes before the call's reply, the result after the text. The window is
// long here (a minute) so that a loaded machine cannot split it: the
// call's end sends the text, and the reply does not wait for the window.
// Before, python's print wrote its text and its newline apart and a
// reader that woke between the writes sent each as its own event.
func TestOutputCoalescedIntoOneEvent(t *testing.T) {
	c := agenttest.Start(t, "--output-window", "1m").Dial(t)
	cases := []struct {
		name string
		call func(ctx context.Context, out func(agent.OutputEvent)) (string, error)
		want []string
	}{
		{"python prints", func(ctx context.Context, out func(agent.OutputEvent)) (string, error) {
			r, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "print('a')\nprint('b')\n7", Stream: true}, out)
			if err != nil {
				return "", err
			}
			return r.Stdout, nil
		}, []string{"a\nb\n"}},
		{"python text and newline apart", func(ctx context.Context, out func(agent.OutputEvent)) (string, error) {
			r, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "import sys, time\nsys.stdout.write('x'); sys.stdout.flush(); time.sleep(0.05); sys.stdout.write('\\n')\n7", Stream: true}, out)
			if err != nil {
				return "", err
			}
			return r.Stdout, nil
		}, []string{"x\n"}},
		{"exec", func(ctx context.Context, out func(agent.OutputEvent)) (string, error) {
			r, err := c.Exec(ctx, agent.ExecParams{Shell: "echo a; sleep 0.05; echo b", Stream: true}, out)
			if err != nil {
				return "", err
			}
			return r.Stdout, nil
		}, []string{"a\nb\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var evs events
			stdout, err := tc.call(ctx, evs.add)
			if err != nil {
				t.Fatal(err)
			}
			if got := evs.of(agent.Stdout); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("stdout events %q, want %q (stdout %q)", got, tc.want, stdout)
			}
			if res := evs.of(agent.Result); len(res) > 0 {
				evs.mu.Lock()
				last := evs.evs[len(evs.evs)-1]
				evs.mu.Unlock()
				if last.Stream != agent.Result {
					t.Fatalf("the result event is not after the text: %+v", evs.evs)
				}
			}
		})
	}
}

// TestOutputStreamsWhileCallRuns: with the default window, a call that
// prints, then waits, has each print delivered while it waits: the cell
// and the process wait for a file the test makes once it has read the
// print, and say "held" if it never came. A coalescer that kept text until
// the call's end fails this.
func TestOutputStreamsWhileCallRuns(t *testing.T) {
	a := agenttest.Start(t)
	c := a.Dial(t)
	const ticks = 3
	cases := []struct {
		name string
		call func(ctx context.Context, dir string, out func(agent.OutputEvent)) (string, error)
	}{
		{"python", func(ctx context.Context, dir string, out func(agent.OutputEvent)) (string, error) {
			code := fmt.Sprintf(`import os, time
for i in range(%d):
    print(f"tick{i}")
    end = time.time() + 15
    while not os.path.exists(os.path.join(%q, f"go{i}")):
        if time.time() > end:
            print("held")
            break
        time.sleep(0.01)
`, ticks, dir)
			r, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: code, Stream: true, TimeoutMs: 120_000}, out)
			if err != nil {
				return "", err
			}
			return r.Stdout, nil
		}},
		{"exec", func(ctx context.Context, dir string, out func(agent.OutputEvent)) (string, error) {
			sh := fmt.Sprintf(`for i in $(seq 0 %d); do echo tick$i; n=0; until [ -e %q/go$i ]; do n=$((n+1)); if [ $n -gt 1500 ]; then echo held; break; fi; sleep 0.01; done; done`, ticks-1, dir)
			r, err := c.Exec(ctx, agent.ExecParams{Shell: sh, Stream: true, TimeoutMs: 120_000}, out)
			if err != nil {
				return "", err
			}
			return r.Stdout, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(a.Home, tc.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var mu sync.Mutex
			seen := ""
			out := func(ev agent.OutputEvent) {
				if ev.Stream != agent.Stdout {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				seen += ev.Data
				for i := 0; i < ticks; i++ {
					if strings.Contains(seen, fmt.Sprintf("tick%d\n", i)) {
						_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("go%d", i)), nil, 0o644)
					}
				}
			}
			stdout, err := tc.call(ctx, dir, out)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			for i := 0; i < ticks; i++ {
				want += fmt.Sprintf("tick%d\n", i)
			}
			if stdout != want {
				t.Fatalf("stdout %q, want %q: a print was held until the call's end", stdout, want)
			}
		})
	}
}

// TestOutputHostilePrinterBounded: a cell printing as fast as it can
// gets events of at most 64 KiB each, its stream stops at the output
// budget, and the call ends (interrupted at its timeout) with the text it
// streamed: joining the kernel's reads keeps each event within the bound.
// The 64 KiB check alone held before coalescing too (the kernel's reader
// takes 64 KiB at most per read), so it shows the joining keeps the bound,
// not that the bound is new; the budget, the truncation and the streamed
// text equal to the call's stdout are what the coalescer could break.
func TestOutputHostilePrinterBounded(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The cell's 2 s timeout counts from the call's start: a cold kernel
	// starting on a loaded machine could spend it all, and the call would
	// time out before the cell printed its budget. A first cell warms it.
	if _, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "1"}, nil); err != nil {
		t.Fatal(err)
	}
	var evs events
	const budget = 512 << 10
	r, err := c.RunCode(ctx, agent.RunCodeParams{
		Language:  agent.Python,
		Code:      "import sys\nwhile True:\n    sys.stdout.write('x' * 1000)",
		Stream:    true,
		TimeoutMs: 2000,
		MaxOutput: budget,
	}, evs.add)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || !r.Truncated {
		t.Fatalf("timedOut %v truncated %v, want both", r.TimedOut, r.Truncated)
	}
	total := 0
	for _, d := range evs.of(agent.Stdout) {
		if len(d) > 64<<10 {
			t.Fatalf("an event of %d bytes, past the 64 KiB bound", len(d))
		}
		total += len(d)
	}
	if total != len(r.Stdout) || total > budget {
		t.Fatalf("streamed %d bytes, stdout %d, budget %d", total, len(r.Stdout), budget)
	}
}

// TestPtyOutputNotCoalesced: a terminal's output goes to the host as it is
// read, whatever the output window (a minute here): a keystroke's echo
// that waited for the window would make a shell feel dead, and E2B's envd
// sends a terminal's chunks as read. The process answers a first line on
// its terminal and waits for a second: the answer must arrive while the
// call still runs, long before the window could end it.
func TestPtyOutputNotCoalesced(t *testing.T) {
	c := agenttest.Start(t, "--output-window", "1m").Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	p := startPty(t, ctx, c, "read x; echo got-$x; read y")
	if err := c.Stdin(ctx, agent.StdinParams{PID: p.pid, Data: "hello\n"}); err != nil {
		t.Fatal(err)
	}
	// The bound is well inside the window: only an event sent as read
	// arrives within it.
	p.waitOut(t, "got-hello", 30*time.Second)
	if err := c.Stdin(ctx, agent.StdinParams{PID: p.pid, Data: "bye\n"}); err != nil {
		t.Fatal(err)
	}
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
}
