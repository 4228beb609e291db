package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/runtime/oci/teardown"
)

// recorder is a testing.TB whose Errorf is kept, not reported: the tests
// below check that the helpers fail the test that leaks.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *recorder) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

// fakeSandbox makes what a daemon's sandbox is to the helpers: a bundle
// in stateDir labelled as a warm pool's, and the pids cgroup
// sandlot/<id> holding a sleeping process of the host. It returns the id
// and the process (reaped by the caller).
func fakeSandbox(t *testing.T, stateDir string) (string, *exec.Cmd) {
	return fakeLabelled(t, stateDir, "sandlot.pool", "default")
}

// fakeLabelled is fakeSandbox with one label, key=value.
func fakeLabelled(t *testing.T, stateDir, key, value string) (string, *exec.Cmd) {
	t.Helper()
	RequireRoot(t)
	ctl := filepath.Join(teardown.CgroupRoot, "pids")
	if _, err := os.Stat(filepath.Join(ctl, "cgroup.procs")); err != nil {
		ctl = teardown.CgroupRoot // a v2 host
	}
	id := "sb-testenv" + strconv.Itoa(os.Getpid())
	cg := filepath.Join(ctl, "sandlot", id)
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(cg) })
	bundle := filepath.Join(stateDir, "bundles", id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(`{"annotations":{"org.sandlot.label.`+key+`":"`+value+`","org.sandlot.runtime":"crun"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	return id, sleep
}

// TestCheckNoSandboxes: a sandbox left with a process in the state dir
// fails the test, named with its labels, and is killed and its cgroup
// removed; a state dir with none passes.
func TestCheckNoSandboxes(t *testing.T) {
	state := t.TempDir()
	r := &recorder{TB: t}
	CheckNoSandboxes(r, state, "daemon")
	if f := r.failures(); f != "" {
		t.Fatalf("an empty state dir failed: %s", f)
	}
	id, sleep := fakeSandbox(t, state)
	left, err := LiveSandboxes(state)
	if err != nil || len(left) != 1 || left[0].ID != id || left[0].Labels["sandlot.pool"] != "default" || len(left[0].PIDs) != 1 || left[0].PIDs[0] != sleep.Process.Pid {
		t.Fatalf("LiveSandboxes: %v %v", left, err)
	}
	CheckNoSandboxes(r, state, "daemon")
	if f := r.failures(); !strings.Contains(f, "daemon left 1 sandbox(es) running") || !strings.Contains(f, id+" [sandlot.pool=default]") {
		t.Fatalf("failures %q", f)
	}
	waited := make(chan error, 1)
	go func() { waited <- sleep.Wait() }()
	select {
	case err := <-waited:
		if ws := sleep.ProcessState; ws == nil || ws.String() != "signal: killed" {
			t.Fatalf("sleep ended with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the sandbox's process still runs")
	}
	if dirs := SandboxCgroups(id); len(dirs) != 0 {
		t.Fatalf("cgroups left: %v", dirs)
	}
}

// TestStartServeStopsAndChecks: a daemon the test did not stop is stopped
// with SIGTERM when the test ends (not killed: its shutdown is what
// destroys the warm pools), and a sandbox left in its --state-dir fails
// the test.
func TestStartServeStopsAndChecks(t *testing.T) {
	state := t.TempDir()
	id, _ := fakeSandbox(t, state)
	term := filepath.Join(t.TempDir(), "term")
	// A stand-in for serve: says it listens, and on SIGTERM notes it and
	// exits 0 (as serve does), leaving the sandbox.
	script := `trap 'echo term > ` + term + `; exit 0' TERM
echo "sandlot listening on http://127.0.0.1:1"
while :; do sleep 0.1; done`
	r := &recorder{TB: t}
	t.Run("daemon", func(t *testing.T) {
		r.TB = t
		StartServe(r, exec.Command("sh", "-c", script, "sh", "--state-dir", state), t.TempDir(), time.Minute)
	})
	if b, err := os.ReadFile(term); err != nil || strings.TrimSpace(string(b)) != "term" {
		t.Errorf("the daemon was not stopped with SIGTERM: %q %v", b, err)
	}
	if f := r.failures(); !strings.Contains(f, "sandlot serve left 1 sandbox(es) running in "+state) || !strings.Contains(f, id) {
		t.Fatalf("failures %q", f)
	}
}

// TestContextSandboxLeft: a context's sandbox left fails CheckNoSandboxes
// and a StartServe whose test set ContextsEnd; without ContextsEnd it is
// killed and only logged (a clean stop detaches it on purpose).
func TestContextSandboxLeft(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check func(t testing.TB, state string)
		fails bool
	}{
		{"CheckNoSandboxes", func(t testing.TB, state string) { CheckNoSandboxes(t, state, "daemon") }, true},
		{"StartServe ContextsEnd", func(t testing.TB, state string) { serveLeaving(t, state, true) }, true},
		{"StartServe", func(t testing.TB, state string) { serveLeaving(t, state, false) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			id, sleep := fakeLabelled(t, state, "sandlot.context", "ctx-1")
			r := &recorder{TB: t}
			t.Run("test", func(t *testing.T) {
				r.TB = t
				tc.check(r, state)
			})
			f := r.failures()
			if failed := strings.Contains(f, "left 1 sandbox(es) running in "+state) && strings.Contains(f, id+" [sandlot.context=ctx-1]"); failed != tc.fails {
				t.Errorf("failures %q; want failed %v", f, tc.fails)
			}
			done := make(chan struct{})
			go func() { sleep.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the sandbox's process still runs")
			}
		})
	}
}

// serveLeaving starts a stand-in for serve on state that exits 0 on
// SIGTERM, leaving what state holds.
func serveLeaving(t testing.TB, state string, contextsEnd bool) {
	script := `trap 'exit 0' TERM
echo "sandlot listening on http://127.0.0.1:1"
while :; do sleep 0.1; done`
	s := StartServe(t, exec.Command("sh", "-c", script, "sh", "--state-dir", state), t.TempDir(), time.Minute)
	s.ContextsEnd = contextsEnd
}

func TestArgValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--state-dir", "/a"}, "/a"},
		{[]string{"serve", "--state-dir=/b"}, "/b"},
		{[]string{"serve", "--state-dir", "/a", "--state-dir=/c"}, "/c"},
		{[]string{"serve", "--state-dir"}, ""},
		{[]string{"serve", "--data-dir", "/d"}, ""},
	} {
		if got := ArgValue(tc.args, "--state-dir"); got != tc.want {
			t.Errorf("ArgValue(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestStartServeDiesWithTest: a test binary that dies without running its
// cleanups (here os.Exit, as a panic or the -timeout kill end it) still
// stops its daemon with SIGTERM, so the daemon's shutdown destroys its
// warm pools instead of serving them forever.
func TestStartServeDiesWithTest(t *testing.T) {
	if term := os.Getenv("TESTENV_DIE_TERM"); term != "" {
		script := `trap 'echo term > ` + term + `; exit 0' TERM
echo "sandlot listening on http://127.0.0.1:1"
while :; do sleep 0.1; done`
		StartServe(t, exec.Command("sh", "-c", script), t.TempDir(), time.Minute)
		os.Exit(3)
	}
	term := filepath.Join(t.TempDir(), "term")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestStartServeDiesWithTest$")
	cmd.Env = append(os.Environ(), "TESTENV_DIE_TERM="+term)
	if out, err := cmd.CombinedOutput(); err == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("the dying test: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(term); strings.TrimSpace(string(b)) == "term" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon of a test binary that died got no SIGTERM")
		}
	}
}
