package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

func execOK(t *testing.T, c *agent.Client, p agent.ExecParams) *agent.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Exec(ctx, p, nil)
	if err != nil {
		t.Fatalf("exec %+v: %v", p, err)
	}
	return r
}

func TestExec(t *testing.T) {
	c, a := agenttest.StartClient(t)
	if err := os.MkdirAll(filepath.Join(a.Home, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		p     agent.ExecParams
		check func(r *agent.ExecResult) error
	}{
		{"argv", agent.ExecParams{Argv: []string{"echo", "a b"}}, func(r *agent.ExecResult) error {
			return want(r.Stdout == "a b\n" && r.ExitCode == 0, r)
		}},
		{"huge timeout is capped, not overflowed", agent.ExecParams{Shell: "echo ok", TimeoutMs: 9223372036855}, func(r *agent.ExecResult) error {
			return want(r.Stdout == "ok\n" && r.ExitCode == 0 && !r.TimedOut, r)
		}},
		{"shell env cwd", agent.ExecParams{Shell: `echo "$FOO"; pwd`, Env: map[string]string{"FOO": "bar"}, Cwd: "work"}, func(r *agent.ExecResult) error {
			return want(r.Stdout == "bar\n"+filepath.Join(a.Home, "work")+"\n", r)
		}},
		{"home is default cwd", agent.ExecParams{Shell: `pwd; echo $HOME`}, func(r *agent.ExecResult) error {
			return want(r.Stdout == a.Home+"\n"+a.Home+"\n", r)
		}},
		{"stdin", agent.ExecParams{Argv: []string{"cat"}, Stdin: "hello"}, func(r *agent.ExecResult) error {
			return want(r.Stdout == "hello", r)
		}},
		{"exit code and stderr", agent.ExecParams{Shell: "echo oops >&2; exit 3"}, func(r *agent.ExecResult) error {
			return want(r.ExitCode == 3 && r.Stderr == "oops\n", r)
		}},
		{"timeout kills the group", agent.ExecParams{Shell: "sleep 30 & sleep 30; echo never", TimeoutMs: 300}, func(r *agent.ExecResult) error {
			return want(r.TimedOut && r.Signal == "SIGKILL" && r.ExitCode == 137 && r.Stdout == "", r)
		}},
		{"background job holding the pipe", agent.ExecParams{Shell: "sleep 5 & echo done"}, func(r *agent.ExecResult) error {
			return want(r.Stdout == "done\n" && r.DurationMs < 2000, r)
		}},
		{"output cap", agent.ExecParams{Shell: "head -c 100000 /dev/zero | tr '\\0' x", MaxOutput: 1000}, func(r *agent.ExecResult) error {
			return want(r.Truncated && len(r.Stdout) == 1000, r)
		}},
		{"process that never reads stdin", agent.ExecParams{Shell: "exit 0", Stdin: strings.Repeat("z", 1<<20)}, func(r *agent.ExecResult) error {
			return want(r.ExitCode == 0, r)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := execOK(t, c, tc.p)
			if err := tc.check(r); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("command not found", func(t *testing.T) {
		_, err := c.Exec(context.Background(), agent.ExecParams{Argv: []string{"no-such-command-xyz"}}, nil)
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("neither argv nor shell", func(t *testing.T) {
		_, err := c.Exec(context.Background(), agent.ExecParams{}, nil)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("err = %v", err)
		}
	})
}

func want(ok bool, r *agent.ExecResult) error {
	if ok {
		return nil
	}
	return fmt.Errorf("unexpected result %+v", r)
}

func TestExecStreamingOrder(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	var mu sync.Mutex
	var events []agent.OutputEvent
	r, err := c.Exec(context.Background(), agent.ExecParams{
		Shell:  "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; sleep 0.01; done",
		Stream: true,
	}, func(ev agent.OutputEvent) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) == 0 || events[0].Stream != agent.Start || events[0].PID != r.PID {
		t.Fatalf("first event = %+v, want start with pid %d", events, r.PID)
	}
	var out, errs strings.Builder
	for _, ev := range events[1:] {
		switch ev.Stream {
		case agent.Stdout:
			out.WriteString(ev.Data)
		case agent.Stderr:
			errs.WriteString(ev.Data)
		}
	}
	if out.String() != "out1\nout2\nout3\nout4\nout5\n" || errs.String() != "err1\nerr2\nerr3\nerr4\nerr5\n" {
		t.Fatalf("streamed stdout %q stderr %q", out.String(), errs.String())
	}
	if out.String() != r.Stdout {
		t.Fatalf("streamed and final stdout differ")
	}
}

// startBackground runs p in a goroutine and returns its pid (from the start
// event) and a channel with the final result.
func startBackground(t *testing.T, c *agent.Client, p agent.ExecParams) (int, <-chan *agent.ExecResult) {
	t.Helper()
	p.Stream = true
	pidc := make(chan int, 1)
	resc := make(chan *agent.ExecResult, 1)
	go func() {
		r, err := c.Exec(context.Background(), p, func(ev agent.OutputEvent) {
			if ev.Stream == agent.Start {
				pidc <- ev.PID
			}
		})
		if err != nil {
			t.Errorf("exec: %v", err)
		}
		resc <- r
	}()
	select {
	case pid := <-pidc:
		return pid, resc
	case <-time.After(10 * time.Second):
		t.Fatal("no start event")
	}
	return 0, nil
}

func TestExecSignalStdinList(t *testing.T) {
	c, a := agenttest.StartClient(t)
	ctx := context.Background()

	pid, resc := startBackground(t, c, agent.ExecParams{Argv: []string{"cat"}, KeepStdin: true, Tag: "catter"})
	procs, err := c.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range procs {
		if p.PID == pid && p.Tag == "catter" && p.Argv[0] == "cat" {
			found = true
		}
	}
	if !found {
		t.Fatalf("pid %d not in %+v", pid, procs)
	}
	if err := c.Stdin(ctx, agent.StdinParams{PID: pid, Data: "one "}); err != nil {
		t.Fatal(err)
	}
	if err := c.Stdin(ctx, agent.StdinParams{PID: pid, Data: "two", EOF: true}); err != nil {
		t.Fatal(err)
	}
	r := <-resc
	if r.Stdout != "one two" || r.ExitCode != 0 {
		t.Fatalf("cat result %+v", r)
	}

	armed := filepath.Join(a.Home, "armed")
	pid, resc = startBackground(t, c, agent.ExecParams{Shell: "trap 'echo got TERM; exit 5' TERM; touch " + armed + "; while :; do sleep 0.05; done"})
	testenv.WaitFor(t, "the trap to be installed", 30*time.Second, func() bool { _, err := os.Stat(armed); return err == nil })
	if err := c.Signal(ctx, agent.SignalParams{PID: pid, Signal: "SIGTERM"}); err != nil {
		t.Fatal(err)
	}
	r = <-resc
	if r.ExitCode != 5 || !strings.Contains(r.Stdout, "got TERM") {
		t.Fatalf("signal result %+v", r)
	}

	pid, resc = startBackground(t, c, agent.ExecParams{Argv: []string{"sleep", "30"}})
	if err := c.Signal(ctx, agent.SignalParams{PID: pid, Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	if r := <-resc; r.Signal != "SIGKILL" {
		t.Fatalf("kill result %+v", r)
	}

	if err := c.Signal(ctx, agent.SignalParams{PID: 999999, Signal: "SIGTERM"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("signal unknown pid: %v", err)
	}
	if err := c.Stdin(ctx, agent.StdinParams{PID: 999999, Data: "x"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("stdin unknown pid: %v", err)
	}
}

func TestExecCancelKillsProcess(t *testing.T) {
	c, a := agenttest.StartClient(t)
	marker := filepath.Join(a.Home, "marker")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Exec(ctx, agent.ExecParams{Shell: "sleep 1; touch " + marker}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("canceled exec kept running")
	}
}

// TestReapsOrphans checks the agent reaps children it did not start
// directly (it is their subreaper here, PID 1 in a sandbox).
func TestReapsOrphans(t *testing.T) {
	c, a := agenttest.StartClient(t)
	// The orphans live long enough to be counted on a loaded machine.
	run(t, c, agent.Bash, "true") // the bash kernel's start is not in the orphans' lifetime
	execOK(t, c, agent.ExecParams{Shell: "for i in 1 2 3 4 5; do (sleep 3 &) ; done; exit 0"})
	run(t, c, agent.Bash, "(sleep 3 &); sleep 0.01")
	agentPid := a.Cmd.Process.Pid
	// The orphans were adopted by the agent (so it is the one that must reap them).
	// A forked child is named sleep only once it has exec'd: wait for that.
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		n := childrenNamed(t, agentPid, "sleep")
		if n == 6 {
			break
		}
		if n > 6 || time.Since(start) > 2*time.Second {
			t.Fatalf("agent adopted %d sleeps, want 6", n)
		}
	}
	// Once they exit, the agent reaps them: no child named sleep is left,
	// neither running nor a zombie.
	deadline := time.Now().Add(20 * time.Second)
	for childrenNamed(t, agentPid, "sleep") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sleeps still children of the agent (%d zombies)", childrenNamed(t, agentPid, "sleep"), zombieChildren(t, agentPid))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// And exec results still get their own exit status.
	for i := 0; i < 20; i++ {
		if r := execOK(t, c, agent.ExecParams{Shell: "exit " + strconv.Itoa(i)}); r.ExitCode != i {
			t.Fatalf("exit %d reported as %d", i, r.ExitCode)
		}
	}
}

func childrenNamed(t *testing.T, ppid int, comm string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) > 2 && s[i+1:j] == comm && f[1] == strconv.Itoa(ppid) {
			n++
		}
	}
	return n
}

func zombieChildren(t *testing.T, ppid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[0] == "Z" && f[1] == strconv.Itoa(ppid) {
			n++
		}
	}
	return n
}

func TestConcurrentCalls(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	// A slow exec must not hold up the others.
	slow := make(chan struct{})
	go func() {
		defer close(slow)
		if _, err := c.Exec(ctx, agent.ExecParams{Shell: "sleep 5"}, nil); err != nil {
			errc <- err
		}
	}()
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 4 {
			case 0:
				r, err := c.Exec(ctx, agent.ExecParams{Argv: []string{"echo", strconv.Itoa(i)}}, nil)
				if err == nil && r.Stdout != strconv.Itoa(i)+"\n" {
					err = fmt.Errorf("exec %d got %q", i, r.Stdout)
				}
				if err != nil {
					errc <- err
				}
			case 1:
				r, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: strconv.Itoa(i) + "*2"}, nil)
				if err == nil && mainText(r) != strconv.Itoa(i*2) {
					err = fmt.Errorf("python %d got %q", i, mainText(r))
				}
				if err != nil {
					errc <- err
				}
			case 2:
				name := fmt.Sprintf("f%d.txt", i)
				if _, err := c.WriteFile(ctx, agent.WriteParams{Path: name, Data: []byte(name)}); err != nil {
					errc <- err
					return
				}
				r, err := c.ReadFile(ctx, agent.ReadParams{Path: name})
				if err == nil && string(r.Data) != name {
					err = fmt.Errorf("read %s got %q", name, r.Data)
				}
				if err != nil {
					errc <- err
				}
			case 3:
				if err := c.Ping(ctx); err != nil {
					errc <- err
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-slow:
		t.Errorf("fast calls finished only after the slow one: not multiplexed")
	default:
	}
	<-slow
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestExecWithoutTimeout: a negative TimeoutMs arms no timer (E2B's
// timeoutMs: 0); the process still ends with its call.
func TestExecWithoutTimeout(t *testing.T) {
	c, a := agenttest.StartClient(t)
	if r := execOK(t, c, agent.ExecParams{Shell: "sleep 0.3; echo done", TimeoutMs: -1}); r.TimedOut || r.Stdout != "done\n" {
		t.Fatalf("result %+v", r)
	}
	marker := filepath.Join(a.Home, "marker")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Exec(ctx, agent.ExecParams{Shell: "sleep 1; touch " + marker, TimeoutMs: -1}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("canceled exec without a timeout kept running")
	}
}

// ptyCall is an exec on an 80x24 terminal, streamed with its stdin kept
// open, running in the background.
type ptyCall struct {
	pid  int
	done chan error // the call's end
	res  *agent.ExecResult

	mu      sync.Mutex
	out     strings.Builder
	streams map[string]bool // of the events after the start
}

// startPty starts shell on a terminal and returns once its process runs.
func startPty(t *testing.T, ctx context.Context, c *agent.Client, shell string) *ptyCall {
	t.Helper()
	p := &ptyCall{done: make(chan error, 1), streams: map[string]bool{}}
	pids := make(chan int, 1)
	go func() {
		r, err := c.Exec(ctx, agent.ExecParams{Shell: shell, Stream: true, KeepStdin: true, Pty: &agent.PtySize{Cols: 80, Rows: 24}},
			func(ev agent.OutputEvent) {
				if ev.Stream == agent.Start {
					pids <- ev.PID
					return
				}
				p.mu.Lock()
				p.streams[ev.Stream] = true
				p.out.WriteString(ev.Data)
				p.mu.Unlock()
			})
		p.res = r
		p.done <- err
	}()
	select {
	case p.pid = <-pids:
	case err := <-p.done:
		t.Fatalf("the call ended before its process started: %v", err)
	}
	return p
}

func (p *ptyCall) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitOut waits, within bound, for s in the terminal's output.
func (p *ptyCall) waitOut(t *testing.T, s string, bound time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(bound); ; time.Sleep(20 * time.Millisecond) {
		got := p.text()
		if strings.Contains(got, s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v: %q", s, bound, got)
		}
	}
}

// TestExecPty: a process on a terminal sees a tty of the asked size, reads
// what is written to it, and a SIGWINCH with a size resizes it; output is
// one pty stream.
func TestExecPty(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := startPty(t, ctx, c, "stty size; test -t 0 && echo is-a-tty; read x; stty size; echo got-$x")
	pid := p.pid
	p.waitOut(t, "is-a-tty", 10*time.Second)
	if err := c.Signal(ctx, agent.SignalParams{PID: pid, Signal: "SIGWINCH", Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	if err := c.Stdin(ctx, agent.StdinParams{PID: pid, Data: "hello\n"}); err != nil {
		t.Fatal(err)
	}
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
	if r := p.res; r.ExitCode != 0 {
		t.Fatalf("result %+v", r)
	}
	got := p.text()
	for _, want := range []string{"24 80", "30 100", "got-hello"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %q", want, got)
		}
	}
	p.mu.Lock()
	if len(p.streams) != 1 || !p.streams[agent.Pty] {
		t.Errorf("streams %v, want only pty", p.streams)
	}
	p.mu.Unlock()
	if err := c.Signal(ctx, agent.SignalParams{PID: 999999, Signal: "SIGWINCH", Cols: 1, Rows: 1}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("resize of no process: %v", err)
	}
}
