package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
)

func TestSpareCommand(t *testing.T) {
	long := strings.Repeat("x", spareMaxCmd+1)
	cases := []struct {
		name string
		p    agent.ExecParams
		ok   bool
	}{
		{"E2B's form", agent.ExecParams{Argv: []string{"/bin/bash", "-l", "-c", "echo ok"}}, true},
		{"empty command", agent.ExecParams{Argv: []string{"/bin/bash", "-l", "-c", ""}}, true},
		{"the longest", agent.ExecParams{Argv: []string{"/bin/bash", "-l", "-c", long[1:]}}, true},
		{"too long", agent.ExecParams{Argv: []string{"/bin/bash", "-l", "-c", long}}, false},
		{"NUL", agent.ExecParams{Argv: []string{"/bin/bash", "-l", "-c", "echo a\x00b"}}, false},
		{"not a login shell", agent.ExecParams{Argv: []string{"/bin/bash", "-c", "echo ok"}}, false},
		{"bash by name", agent.ExecParams{Argv: []string{"bash", "-l", "-c", "echo ok"}}, false},
		{"more arguments", agent.ExecParams{Argv: []string{"/bin/bash", "-l", "-c", "echo $1", "x", "y"}}, false},
		{"shell", agent.ExecParams{Shell: "echo ok"}, false},
		{"terminal", agent.ExecParams{Argv: []string{"/bin/bash", "-l", "-c", "echo ok"}, Pty: &agent.PtySize{Cols: 80, Rows: 24}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := spareCommand(tc.p); ok != tc.ok {
				t.Errorf("spareCommand = %v, want %v", ok, tc.ok)
			}
		})
	}
}

// waitFor polls cond up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestRunnable: a stopped process, or one a stop is pending for, is not
// fit to take a command; a continued one is again; a dead one is not.
func TestRunnable(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	pid := cmd.Process.Pid
	waitFor(t, "sleep to run", func() bool { return runnable(pid) })
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	if runnable(pid) { // pending or taken: either way not runnable at once
		t.Error("runnable right after SIGSTOP")
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	waitFor(t, "sleep to run again", func() bool { return runnable(pid) })
	_ = cmd.Process.Kill()
	<-done
	if runnable(pid) {
		t.Error("a dead process is runnable")
	}
}

// TestLoginFilesStamp: a change to a login file, or one appearing, shows
// in the stamps.
func TestLoginFilesStamp(t *testing.T) {
	home := t.TempDir()
	before := stampFiles(loginFiles(home))
	if again := stampFiles(loginFiles(home)); !equalStamps(before, again) {
		t.Fatal("stamps of unchanged files differ")
	}
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("x=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := stampFiles(loginFiles(home))
	if equalStamps(before, after) {
		t.Error("a new ~/.bashrc left the stamps equal")
	}
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("x=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if equalStamps(after, stampFiles(loginFiles(home))) {
		t.Error("a rewritten ~/.bashrc left the stamps equal")
	}
}

func equalStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestIdleSpareEnds: a spare no command takes is ended after spareIdle,
// and none is started again until a command runs; the agent's stop ends
// the spare too.
func TestIdleSpareEnds(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Fatal("no /bin/bash")
	}
	old := spareIdle
	spareIdle = 200 * time.Millisecond
	t.Cleanup(func() { spareIdle = old })
	s := New(Config{Home: t.TempDir()})
	current := func() *spareShell {
		s.spare.mu.Lock()
		defer s.spare.mu.Unlock()
		return s.spare.cur
	}
	s.fillSpare()
	waitFor(t, "a spare", func() bool { return current() != nil })
	sp := current()
	waitFor(t, "the idle spare to end", func() bool { return current() == nil && sp.p.Exited() })
	time.Sleep(3 * spareIdle)
	if current() != nil {
		t.Fatal("a spare started again without a command")
	}

	spareIdle = time.Hour
	s.fillSpare()
	waitFor(t, "a spare", func() bool { return current() != nil })
	sp = current()
	s.closeSpare()
	waitFor(t, "the spare to end with the agent", func() bool { return sp.p.Exited() })
	s.fillSpare()
	time.Sleep(100 * time.Millisecond)
	if current() != nil {
		t.Error("a spare started after the agent stopped")
	}
}

func TestEnvGained(t *testing.T) {
	had := []string{"A=1", "B=2"}
	cases := []struct {
		name string
		want []string
		out  string
		ok   bool
	}{
		{"same", []string{"A=1", "B=2"}, "", true},
		{"reordered", []string{"B=2", "A=1"}, "", true},
		{"added", []string{"A=1", "B=2", "C=x y"}, "export C='x y'; ", true},
		{"changed, quoted", []string{"A=it's", "B=2"}, `export A='it'\''s'; `, true},
		{"removed", []string{"A=1"}, "", false},
		{"a name no shell exports", []string{"A=1", "B=2", "C-D=1"}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := envGained(had, tc.want)
			if ok != tc.ok || ok && out != tc.out {
				t.Errorf("envGained = %q, %v; want %q, %v", out, ok, tc.out, tc.ok)
			}
		})
	}
}
