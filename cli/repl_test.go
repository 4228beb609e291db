package cli

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/internal/testenv"
)

// ptySession is `sandlot run -i` on a pseudo-terminal, typed into as a
// person would.
type ptySession struct {
	t        *testing.T
	ptmx     *os.File
	tty      *os.File
	cmd      *exec.Cmd
	out      testenv.Buffer
	mark     int
	copyDone chan struct{}
}

func startREPL(t *testing.T, state string) *ptySession {
	t.Helper()
	return startOnPTY(t, nil, "run", "-i", "--state-dir", state)
}

// startOnPTY runs the sandlot binary with args (and env, when not nil) on
// a pseudo-terminal of 40 rows and 120 columns.
func startOnPTY(t *testing.T, env []string, args ...string) *ptySession {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.SandlotBinary(t), args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// Its own session with the pty as controlling terminal: Ctrl-C typed
	// there is the line discipline's SIGINT to it, as in a real shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &ptySession{t: t, ptmx: ptmx, tty: tty, cmd: cmd, copyDone: make(chan struct{})}
	go func() {
		defer close(s.copyDone)
		io.Copy(&s.out, ptmx)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		ptmx.Close()
		tty.Close()
	})
	return s
}

func (s *ptySession) send(keys string) {
	s.t.Helper()
	if _, err := s.ptmx.Write([]byte(keys)); err != nil {
		s.t.Fatal(err)
	}
}

// expect waits for want in what the terminal showed since the last match.
func (s *ptySession) expect(want string) {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second) // the first prompt waits for a sandbox
	for time.Now().Before(deadline) {
		got := s.out.String()
		if i := strings.Index(got[s.mark:], want); i >= 0 {
			s.mark += i + len(want)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("terminal never showed %q; after the last match it showed:\n%s", want, s.out.String()[s.mark:])
}

// cooked waits until the REPL has left the line editor's raw mode: a cell
// runs, and Ctrl-C is the tty's signal.
func (s *ptySession) cooked() {
	s.t.Helper()
	for range 500 {
		tio, err := unix.IoctlGetTermios(int(s.tty.Fd()), unix.TCGETS)
		if err != nil {
			s.t.Fatal(err)
		}
		if tio.Lflag&unix.ISIG != 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatal("the terminal stayed raw while the cell ran")
}

// exit waits for the session to end and returns its exit status.
func (s *ptySession) exit() int {
	s.t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			s.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		s.t.Fatalf("the session did not end; the terminal showed:\n%s", s.out.String()[s.mark:])
		return -1
	}
}

// TestREPLTerminal: on a terminal, run -i edits lines (an arrow recalls
// the previous line, which is then extended), Ctrl-C stops a running
// cell and gives the prompt back with the session's state intact, and
// Ctrl-D, or a second Ctrl-C at an empty prompt, ends the session.
func TestREPLTerminal(t *testing.T) {
	lrunNeedAgent(t)
	state := t.TempDir()

	s := startREPL(t, state)
	s.expect("python> ")
	s.send("x = 41\r")
	s.expect("python> ")
	s.send("\x1b[A") // up: the line x = 41 comes back
	s.expect("x = 41")
	s.send(" + 1\r") // x = 41 + 1
	s.expect("python> ")
	s.send("print(x * 10)\r")
	s.expect("420")
	s.expect("python> ")

	// The loop says it runs ("tick", which its echoed line does not
	// hold) before Ctrl-C is sent: a fixed pause could end first.
	s.send("while True: print('ti'+'ck', flush=True); __import__('time').sleep(0.1)\r")
	s.cooked()
	s.expect("tick")
	s.send("\x03")
	s.expect("interrupted")
	s.expect("python> ")
	s.send("print(x * 10)\r")
	s.expect("420") // the state outlived the interrupt
	s.expect("python> ")

	s.send("abc\x03") // drops the line, does not leave
	s.expect("^C")
	s.expect("python> ")
	s.send("print(x + 1)\r")
	s.expect("43")
	s.expect("python> ")
	s.send("\x04") // Ctrl-D at an empty prompt
	if code := s.exit(); code != 0 {
		t.Fatalf("Ctrl-D: exit %d, want 0; terminal:\n%s", code, s.out.String())
	}

	s = startREPL(t, state)
	s.expect("python> ")
	s.send("\x03")
	s.expect("Ctrl-C again")
	s.send("\x03")
	if code := s.exit(); code != 0 {
		t.Fatalf("Ctrl-C twice: exit %d, want 0; terminal:\n%s", code, s.out.String())
	}
}
