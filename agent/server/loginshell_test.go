package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/agent/server"
)

// e2bCmd is an exec as E2B's SDKs send every command: a login bash.
func e2bCmd(cmd string) agent.ExecParams {
	return agent.ExecParams{Argv: []string{"/bin/bash", "-l", "-c", cmd}}
}

// coldCmd is the same command with a variable set, which no spare
// started with: it starts its own bash, as every command did before.
func coldCmd(cmd string) agent.ExecParams {
	p := e2bCmd(cmd)
	p.Env = map[string]string{"SANDLOT_T_COLD": "1"}
	return p
}

// spareShell waits for the agent's spare login shell (a child of the
// agent whose command line is the loader) other than not, and returns
// its pid.
func spareShell(t *testing.T, agentPID, not int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pid := findSpare(agentPID, not); pid != 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent started no spare login shell")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func findSpare(agentPID, not int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == not {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("SANDLOT_SPARE_CMD")) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(agentPID) {
			return pid
		}
	}
	return 0
}

// envLines is the sorted environment a command printed, without what
// differs between any two bash processes or was set to tell them apart.
func envLines(out string) []string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		// SHLVL: a fresh `bash -c env` execs env in its place, one
		// level down (0); through the spare env is the shell's child
		// (1): a difference docs/e2b-lifecycle.md states.
		if strings.HasPrefix(l, "_=") || strings.HasPrefix(l, "SANDLOT_T_COLD=") || strings.HasPrefix(l, "SHLVL=") {
			continue
		}
		keep = append(keep, l)
	}
	sort.Strings(keep)
	return keep
}

// TestSpareLoginShell: a command of E2B's form runs in the login shell
// the agent started ahead (its pid is the spare's), and behaves as the
// bash it would have started: pid, $0, cwd, user, environment, login
// profile, positional parameters, stdin, exit code, signals, the process
// list.
func TestSpareLoginShell(t *testing.T) {
	a := agenttest.Start(t)
	c := a.Dial(t)
	ctx := context.Background()
	apid := a.Cmd.Process.Pid
	// A login profile of the user's: its effects must be there.
	if err := os.WriteFile(filepath.Join(a.Home, ".profile"), []byte("export FROM_PROFILE=yes\nalias ll='ls -l'\nprofile_fn() { echo fn; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prev := 0
	// next waits for a spare started after the last take and returns it.
	next := func() int {
		t.Helper()
		prev = spareShell(t, apid, prev)
		return prev
	}
	// The first spare may predate the profile: it is then discarded.
	execOK(t, c, e2bCmd("true"))

	script := `echo "pid=$$ 0=$0 argc=$# cwd=$(pwd) home=$HOME user=$USER"; shopt -q login_shell && echo login; echo "profile=$FROM_PROFILE fn=$(profile_fn) cmd=[$SANDLOT_SPARE_CMD$SANDLOT_SPARE_ENV]"; type -t ll; if [ -e /dev/fd/3 ]; then echo fd3 open; else echo fd3 closed; fi`
	sp := next()
	r := execOK(t, c, e2bCmd(script))
	if r.PID != sp {
		t.Fatalf("pid %d; want the spare's %d (the command did not take it)", r.PID, sp)
	}
	want := fmt.Sprintf("pid=%d 0=/bin/bash argc=0 cwd=%s home=%s user=%s\nlogin\nprofile=yes fn=fn cmd=[]\n", sp, a.Home, a.Home, "user")
	if !strings.HasPrefix(r.Stdout, want) || !strings.HasSuffix(r.Stdout, "fd3 closed\n") || r.ExitCode != 0 {
		t.Fatalf("spare ran %q (exit %d, stderr %q); want it to start %q", r.Stdout, r.ExitCode, r.Stderr, want)
	}
	cold := execOK(t, c, coldCmd(script))
	if strings.Replace(cold.Stdout, strconv.Itoa(cold.PID), strconv.Itoa(sp), 1) != r.Stdout {
		t.Errorf("through the spare:\n%s\nstarted fresh:\n%s", r.Stdout, cold.Stdout)
	}

	// The environment is the one a fresh login bash gets.
	sp = next()
	r = execOK(t, c, e2bCmd("env"))
	cold = execOK(t, c, coldCmd("env"))
	if r.PID != sp || strings.Join(envLines(r.Stdout), "\n") != strings.Join(envLines(cold.Stdout), "\n") {
		t.Errorf("spare (pid %d of %d) env:\n%s\nfresh env:\n%s", r.PID, sp, r.Stdout, cold.Stdout)
	}

	cases := []struct {
		name  string
		p     agent.ExecParams
		check func(r *agent.ExecResult) error
	}{
		{"stdin", func() agent.ExecParams { p := e2bCmd("cat; echo end"); p.Stdin = "hello\n"; return p }(), func(r *agent.ExecResult) error {
			return want2(r.Stdout == "hello\nend\n", r)
		}},
		{"exit code and stderr", e2bCmd("echo oops >&2; exit 7"), func(r *agent.ExecResult) error {
			return want2(r.ExitCode == 7 && r.Stderr == "oops\n", r)
		}},
		{"syntax error", e2bCmd("if then"), func(r *agent.ExecResult) error {
			return want2(r.ExitCode == 2 && strings.Contains(r.Stderr, "syntax error"), r)
		}},
		{"whitespace and backslashes kept", e2bCmd("printf '%s|' '  a\\tb  ' \"x\\\\y\"\n\n"), func(r *agent.ExecResult) error {
			return want2(r.Stdout == `  a\tb  |x\y|`, r)
		}},
		{"timeout kills the group", func() agent.ExecParams { p := e2bCmd("sleep 30 & sleep 30; echo never"); p.TimeoutMs = 300; return p }(), func(r *agent.ExecResult) error {
			return want2(r.TimedOut && r.Signal == "SIGKILL" && r.ExitCode == 137 && r.Stdout == "", r)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := next()
			r := execOK(t, c, tc.p)
			if r.PID != sp {
				t.Errorf("pid %d; want the spare's %d", r.PID, sp)
			}
			if err := tc.check(r); err != nil {
				t.Error(err)
			}
		})
	}

	t.Run("signals and the process list", func(t *testing.T) {
		for _, sig := range []struct {
			name string
			code int
		}{{"SIGKILL", 137}, {"SIGTERM", 143}, {"SIGINT", 130}} {
			sp := next()
			// Signalled once it runs the command: a signal a login bash
			// gets while its profile runs is its own affair, spare or not.
			pid, resc := startRunning(t, c, e2bCmd("echo up; sleep 30"))
			if pid != sp {
				t.Errorf("pid %d; want the spare's %d", pid, sp)
			}
			procs, err := c.Processes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			listed := false
			for _, pr := range procs {
				listed = listed || pr.PID == pid && strings.Join(pr.Argv, " ") == "/bin/bash -l -c echo up; sleep 30"
			}
			if !listed {
				t.Errorf("pid %d not listed as the command: %+v", pid, procs)
			}
			if err := c.Signal(ctx, agent.SignalParams{PID: pid, Signal: sig.name}); err != nil {
				t.Fatal(err)
			}
			if r := <-resc; r == nil || r.ExitCode != sig.code || r.Signal != sig.name {
				t.Errorf("%s: result %+v; want exit %d", sig.name, r, sig.code)
			}
		}
	})

	t.Run("input kept open", func(t *testing.T) {
		sp := next()
		p := e2bCmd("read -r a; echo got $a")
		p.KeepStdin = true
		pid, resc := startBackground(t, c, p)
		if pid != sp {
			t.Errorf("pid %d; want the spare's %d", pid, sp)
		}
		if err := c.Stdin(ctx, agent.StdinParams{PID: pid, Data: "line\n", EOF: true}); err != nil {
			t.Fatal(err)
		}
		if r := <-resc; r == nil || r.Stdout != "got line\n" {
			t.Errorf("result %+v", r)
		}
	})

	t.Run("env.set reaches the spare", func(t *testing.T) {
		// A warm sandbox's claim sets its identity so, just before its
		// first command: that command still takes the spare, which
		// exports what the base environment gained.
		sp := next()
		if err := c.SetEnv(ctx, map[string]string{"SET_LATER": "it's \"q\" $x\nl"}); err != nil {
			t.Fatal(err)
		}
		r := execOK(t, c, e2bCmd(`printf '%s|' "$SET_LATER"; env`))
		cold := execOK(t, c, coldCmd(`printf '%s|' "$SET_LATER"; env`))
		if r.PID != sp || !strings.HasPrefix(r.Stdout, "it's \"q\" $x\nl|") || strings.Join(envLines(r.Stdout), "\n") != strings.Join(envLines(cold.Stdout), "\n") {
			t.Errorf("after env.set, through the spare %d (pid %d):\n%s\nfresh:\n%s", sp, r.PID, r.Stdout, cold.Stdout)
		}
	})

	t.Run("a changed profile discards the spare", func(t *testing.T) {
		sp := next()
		if err := os.WriteFile(filepath.Join(a.Home, ".profile"), []byte("export FROM_PROFILE=changed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := execOK(t, c, e2bCmd("echo $FROM_PROFILE"))
		if r.PID == sp || r.Stdout != "changed\n" {
			t.Errorf("after the profile changed: pid %d (spare %d), %q; want a fresh login shell reading it", r.PID, sp, r.Stdout)
		}
	})
}

// TestSpareLoginShellTampered: code in the sandbox can reach the spare
// (it runs as the same user): killing it, or writing into its command
// pipe, its stdin or its output, must not change what the next command
// runs, reads or prints, and no command's variables reach another.
func TestSpareLoginShellTampered(t *testing.T) {
	a := agenttest.Start(t)
	c := a.Dial(t)
	apid := a.Cmd.Process.Pid
	prev := 0
	attacks := []struct{ name, attack string }{
		{"killed", "kill -9 %d"},
		{"stopped", "kill -STOP %d"},
		{"command injected", `printf 'echo INJECTED\0' > /proc/%d/fd/3`},
		{"command prefixed", `printf 'echo INJECTED; ' > /proc/%d/fd/3`},
		// pidfd_getfd (438) takes a copy of the spare's end of fd 3: what
		// is written there goes to the agent, which then drops the spare.
		{"command socket written", `python3 -c "import ctypes,os; l=ctypes.CDLL(None,use_errno=True); fd=l.syscall(438,l.syscall(434,%d,0),3,0); os.write(fd,b'echo INJECTED\0')"`},
		{"stdin injected", `printf 'INJECTED\n' > /proc/%d/fd/0`},
		{"output injected", `printf 'INJECTED\n' > /proc/%d/fd/1; printf 'INJECTED\n' > /proc/%d/fd/2`},
	}
	for _, at := range attacks {
		t.Run(at.name, func(t *testing.T) {
			sp := spareShell(t, apid, prev)
			prev = sp
			attack := strings.ReplaceAll(at.attack, "%d", strconv.Itoa(sp))
			// The attack may fail (fd 3 is a socket, which does not
			// open through /proc): what counts is the next command.
			atk := execOK(t, c, coldCmd(attack))
			t.Logf("attack %q: exit %d %s", attack, atk.ExitCode, atk.Stderr)
			p := e2bCmd("read -r line; echo \"got $line\"; echo done >&2")
			p.Stdin = "mine\n"
			r := execOK(t, c, p)
			if r.Stdout != "got mine\n" || r.Stderr != "done\n" || r.ExitCode != 0 {
				t.Errorf("after the spare was %s: %+v; want the command's own input and output", at.name, r)
			}
			if atk.ExitCode == 0 && r.PID == sp {
				t.Errorf("the tampered spare %d ran the command", sp)
			}
		})
	}
	t.Run("variables stay with their command", func(t *testing.T) {
		p := coldCmd("true")
		p.Env["SECRET"] = "s3cret"
		execOK(t, c, p)
		p.Argv[3] = "export LEAK=1; true"
		execOK(t, c, p)
		sp := spareShell(t, apid, prev)
		r := execOK(t, c, e2bCmd(`echo "[$SECRET$LEAK]"`))
		if r.Stdout != "[]\n" {
			t.Errorf("a later command (pid %d, spare %d) saw %q", r.PID, sp, r.Stdout)
		}
	})
}

func want2(ok bool, r *agent.ExecResult) error {
	if ok {
		return nil
	}
	return fmt.Errorf("unexpected result %+v", r)
}

// startRunning starts p streaming and returns its pid once it printed
// its first output.
func startRunning(t *testing.T, c *agent.Client, p agent.ExecParams) (int, <-chan *agent.ExecResult) {
	t.Helper()
	p.Stream = true
	pidc := make(chan int, 1)
	up := make(chan struct{}, 1)
	resc := make(chan *agent.ExecResult, 1)
	go func() {
		r, err := c.Exec(context.Background(), p, func(ev agent.OutputEvent) {
			switch ev.Stream {
			case agent.Start:
				pidc <- ev.PID
			case agent.Stdout:
				select {
				case up <- struct{}{}:
				default:
				}
			}
		})
		if err != nil {
			t.Errorf("exec: %v", err)
		}
		resc <- r
	}()
	select {
	case pid := <-pidc:
		select {
		case <-up:
			return pid, resc
		case <-time.After(30 * time.Second):
			t.Fatal("no output")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no start event")
	}
	return 0, nil
}

// TestSpareConcurrentCommands: commands arriving at once (the agent in
// this process, for the race detector) each run once, as themselves:
// at most one takes the spare, the others start their own bash, and
// every one's output is its own.
func TestSpareConcurrentCommands(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.New(server.Config{Socket: sock, Home: filepath.Join(dir, "home")}).Serve(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	var c *agent.Client
	var err error
	for i := 0; i < 200; i++ {
		if c, err = agent.Dial(ctx, sock, agent.ClientConfig{}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if pid := spareShell(t, os.Getpid(), 0); pid == 0 {
		t.Fatal("no spare")
	}
	for round := 0; round < 3; round++ {
		const n = 8
		errc := make(chan error, n)
		for i := 0; i < n; i++ {
			go func() {
				r, err := c.Exec(ctx, e2bCmd(fmt.Sprintf("echo %d $$", i)), nil)
				if err == nil && (r.Stdout != fmt.Sprintf("%d %d\n", i, r.PID) || r.ExitCode != 0) {
					err = fmt.Errorf("command %d: %+v", i, r)
				}
				errc <- err
			}()
		}
		for i := 0; i < n; i++ {
			if err := <-errc; err != nil {
				t.Error(err)
			}
		}
	}
}
