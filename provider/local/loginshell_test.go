package local

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// e2bExec runs cmd as E2B's SDKs send it (a login bash); env, when set,
// makes it start its own bash instead of taking the spare.
func e2bExec(t *testing.T, c *agent.Client, p agent.ExecParams) *agent.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p.Argv = []string{"/bin/bash", "-l", "-c", p.Argv[0]}
	if p.TimeoutMs == 0 {
		p.TimeoutMs = 30000
	}
	r, err := c.Exec(ctx, p, nil)
	if err != nil {
		t.Fatalf("exec %q: %v", p.Argv[3], err)
	}
	return r
}

// findSpareIn waits for the spare login shell in the sandbox and returns
// its pid there (a probe of its own that is no spare: it names the
// loader's variable in two pieces).
func findSpareIn(t *testing.T, c *agent.Client, not int) int {
	t.Helper()
	probe := `for i in $(seq 600); do for p in /proc/[0-9]*; do n=${p#/proc/}; [ "$n" != ` + strconv.Itoa(not) + ` ] && grep -qs "SANDLOT_SPARE""_CMD" $p/cmdline && { echo $n; exit 0; }; done; sleep 0.05; done; exit 1`
	r := e2bExec(t, c, agent.ExecParams{Argv: []string{probe}, Env: map[string]string{"PROBE": "1"}})
	pid, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("no spare login shell in the sandbox: %+v", r)
	}
	return pid
}

// TestSpareLoginShellOnImage: in a sandbox of the default template (its
// Debian profile, the user's ids), a command of E2B's form runs in the
// login shell started ahead and does what a fresh `bash -l -c` does;
// one for root never uses the user's spare; and the user's code tampering
// with the spare does not reach the next command.
func TestSpareLoginShellOnImage(t *testing.T) {
	s, _ := debiantest.Default(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			p := newImageProvider(t, kind, s, false)
			c := create(t, p, contexts.Spec{})
			ctx := context.Background()
			cold := map[string]string{"SANDLOT_T_COLD": "1"}

			script := `echo "$$ $0 $# $(pwd) $HOME $USER $(id -un) $PATH"; shopt -q login_shell && echo login; umask`
			sp := findSpareIn(t, c, 0)
			r := e2bExec(t, c, agent.ExecParams{Argv: []string{script}})
			f := e2bExec(t, c, agent.ExecParams{Argv: []string{script}, Env: cold})
			want := strconv.Itoa(sp) + " /bin/bash 0 /home/user /home/user user user /usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games\nlogin\n"
			if r.PID != sp || !strings.HasPrefix(r.Stdout, want) {
				t.Fatalf("through the spare %d: pid %d, %q; want %q", sp, r.PID, r.Stdout, want)
			}
			if got := strings.Replace(f.Stdout, strconv.Itoa(f.PID), strconv.Itoa(sp), 1); got != r.Stdout {
				t.Errorf("spare: %q; fresh: %q", r.Stdout, got)
			}

			sp = findSpareIn(t, c, sp)
			r = e2bExec(t, c, agent.ExecParams{Argv: []string{"env"}})
			f = e2bExec(t, c, agent.ExecParams{Argv: []string{"env"}, Env: cold})
			if r.PID != sp || envOf(r.Stdout) != envOf(f.Stdout) {
				t.Errorf("spare (pid %d of %d) env:\n%s\nfresh:\n%s", r.PID, sp, r.Stdout, f.Stdout)
			}

			sp = findSpareIn(t, c, sp)
			r = e2bExec(t, c, agent.ExecParams{Argv: []string{"read -r a; echo \"got $a\"; echo e >&2; exit 4"}, Stdin: "in\n"})
			if r.PID != sp || r.Stdout != "got in\n" || r.Stderr != "e\n" || r.ExitCode != 4 {
				t.Errorf("stdin and exit through the spare %d: %+v", sp, r)
			}

			sp = findSpareIn(t, c, sp)
			done := make(chan *agent.ExecResult, 1)
			go func() {
				r, _ := c.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/bash", "-l", "-c", "sleep 60"}, TimeoutMs: 30000}, nil)
				done <- r
			}()
			deadline := time.Now().Add(30 * time.Second)
			for killed := false; !killed; {
				procs, err := c.Processes(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, pr := range procs {
					if pr.PID == sp {
						if err := c.Signal(ctx, agent.SignalParams{PID: sp, Signal: "SIGKILL"}); err != nil {
							t.Fatal(err)
						}
						killed = true
					}
				}
				if !killed && time.Now().After(deadline) {
					t.Fatalf("the spare %d never ran the command: %+v", sp, procs)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if r := <-done; r == nil || r.ExitCode != 137 || r.Signal != "SIGKILL" {
				t.Errorf("killed: %+v", r)
			}

			// root's commands start their own bash: the user's spare
			// holds nothing of root's.
			sp = findSpareIn(t, c, sp)
			r = e2bExec(t, c, agent.ExecParams{Argv: []string{"id -u; echo $HOME"}, User: agent.RootUser})
			if r.PID == sp || r.Stdout != "0\n/root\n" {
				t.Errorf("root's command: %+v (spare %d)", r, sp)
			}

			// The user's code tampering with the spare.
			attacks := []string{
				"kill -9 %d",
				"printf 'INJECTED\\n' > /proc/%d/fd/0",
				"printf 'echo INJECTED; ' > /proc/%d/fd/3",
				`python3 -c "import ctypes,os; l=ctypes.CDLL(None,use_errno=True); fd=l.syscall(438,l.syscall(434,%d,0),3,0); os.write(fd,b'echo INJECTED\0')"`,
			}
			sp = 0 // root's command left the user's spare where it was
			for _, at := range attacks {
				sp = findSpareIn(t, c, sp)
				atk := e2bExec(t, c, agent.ExecParams{Argv: []string{strings.ReplaceAll(at, "%d", strconv.Itoa(sp))}, Env: cold})
				r := e2bExec(t, c, agent.ExecParams{Argv: []string{`read -r a; echo "got $a"`}, Stdin: "mine\n"})
				if r.Stdout != "got mine\n" || r.ExitCode != 0 || atk.ExitCode == 0 && r.PID == sp {
					t.Errorf("after %q (exit %d %s): %+v", at, atk.ExitCode, atk.Stderr, r)
				}
			}
		})
	}
}

// envOf is an environment as text, sorted, without what differs between
// two bash processes by design (docs/e2b-lifecycle.md: SHLVL of a program bash
// execs in its place) or was set to tell them apart.
func envOf(out string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "_=") && !strings.HasPrefix(l, "SHLVL=") && !strings.HasPrefix(l, "SANDLOT_T_COLD=") {
			keep = append(keep, l)
		}
	}
	sort.Strings(keep)
	return strings.Join(keep, "\n")
}
