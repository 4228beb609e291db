package testenv

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Serve is a `sandlot serve` process a test started (StartServe).
type Serve struct {
	Cmd     *exec.Cmd
	URL     string // where it listens, http://host:port
	LogPath string // its stderr
	// ContextsEnd says the test ends every context it makes before the
	// daemon stops: a context's sandbox left in --state-dir then fails it
	// too. Unset, such a sandbox is killed and only logged (a clean stop
	// detaches it on purpose; checkSandboxes).
	ContextsEnd bool
	done        chan error
	exited      bool
	err         error
}

var listenRE = regexp.MustCompile(`sandlot listening on (http://\S+)`)

// StartServe starts cmd, a `sandlot serve` command line, and waits up to
// timeout for its listening line. Its stderr goes to a file in logDir: a
// file, not a pipe, since sandboxes outlive the daemon by design and a
// child holding a pipe would keep cmd.Wait copying forever.
//
// When the test ends, a process that has not exited is stopped as an
// operator would, with SIGTERM (Stop: a SIGKILL would skip the shutdown
// that destroys the warm pools), and the sandboxes its --state-dir still
// runs are checked and killed: a warm one fails the test, and so does a
// context's when the test set ContextsEnd (a context sandbox a clean stop
// detaches on purpose outlives a test daemon too, and nothing would ever
// reattach it).
func StartServe(t testing.TB, cmd *exec.Cmd, logDir string, timeout time.Duration) *Serve {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.CreateTemp(logDir, "serve-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, logf
	// A test binary that dies without its cleanups (a panic, the -timeout
	// kill) stops its daemon as the cleanup would: with SIGTERM.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	}
	err = startOnForkThread(cmd)
	pw.Close()
	logf.Close()
	if err != nil {
		pr.Close()
		t.Fatal(err)
	}
	s := &Serve{Cmd: cmd, LogPath: logf.Name(), done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	urlc := make(chan string, 1)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
				// Keep reading: a write to a closed stdout would kill serve.
				io.Copy(io.Discard, pr)
				return
			}
		}
	}()
	state := ArgValue(cmd.Args, "--state-dir")
	t.Cleanup(func() {
		if !s.exited {
			if err := s.stop(stopTimeout); err != nil {
				t.Error(err)
			}
		}
		if state != "" {
			checkSandboxes(t, state, "sandlot serve", s.ContextsEnd)
		} else {
			t.Log("sandlot serve had no --state-dir on its command line: its sandboxes left were not checked")
		}
	})
	select {
	case s.URL = <-urlc:
	case err := <-s.done:
		s.exited, s.err = true, err
		t.Fatalf("serve exited: %v\n%s", err, s.Log())
	case <-time.After(timeout):
		s.Cmd.Process.Kill()
		s.exited, s.err = true, <-s.done
		t.Fatalf("serve did not start within %v\n%s", timeout, s.Log())
	}
	return s
}

// forkThread runs the functions sent to it on one OS thread that never
// exits: the parent death signal follows the thread that forked, not the
// process, and a thread of the test binary can exit mid-test (a goroutine
// that locked it returns, as namespace code does on an error).
var forkThread = sync.OnceValue(func() chan<- func() {
	c := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for f := range c {
			f()
		}
	}()
	return c
})

// startOnForkThread is cmd.Start on forkThread.
func startOnForkThread(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	forkThread() <- func() { errc <- cmd.Start() }
	return <-errc
}

// stopTimeout bounds the SIGTERM stop of a daemon a test left running: a
// daemon's own bound on its shutdown is 30 s (serve's close).
const stopTimeout = time.Minute

// ArgValue is flag name's value in args ("--name v" or "--name=v"), the
// last one given; "" when absent.
func ArgValue(args []string, name string) string {
	v := ""
	for i, a := range args {
		switch {
		case a == name && i+1 < len(args):
			v = args[i+1]
		case strings.HasPrefix(a, name+"="):
			v = a[len(name)+1:]
		}
	}
	return v
}

// Log returns what the process wrote to stderr so far.
func (s *Serve) Log() string {
	b, _ := os.ReadFile(s.LogPath)
	return string(b)
}

// Exited reports whether the process is known to have exited.
func (s *Serve) Exited() bool { return s.exited }

// Stop sends SIGTERM and fails t unless the process exits cleanly within
// timeout (it is killed then).
func (s *Serve) Stop(t testing.TB, timeout time.Duration) {
	t.Helper()
	if s.exited {
		t.Fatal("serve already stopped")
	}
	if err := s.stop(timeout); err != nil {
		t.Fatal(err)
	}
}

// stop is Stop's work, its failure an error: the end-of-test cleanup goes
// on to check the sandboxes after a daemon that did not stop cleanly.
func (s *Serve) stop(timeout time.Duration) error {
	s.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.exited, s.err = true, err
		if err != nil {
			return fmt.Errorf("serve exited with %v\n%s", err, tail(s.Log(), 4096))
		}
	case <-time.After(timeout):
		s.Cmd.Process.Kill()
		s.exited, s.err = true, <-s.done
		return fmt.Errorf("serve did not stop within %v of SIGTERM\n%s", timeout, tail(s.Log(), 4096))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
