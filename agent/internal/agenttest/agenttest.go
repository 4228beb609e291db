// Package agenttest starts a real sandlot-agent as a host process on a unix
// socket in a temp dir, for tests and benchmarks that drive it through the
// Client.
package agenttest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/internal/testenv"
)

// Agent is a running agent process.
type Agent struct {
	Socket string
	Home   string
	Cmd    *exec.Cmd
}

// Start runs the agent with a fresh home and socket; it is killed at the
// end of the test. args are extra command-line flags.
func Start(tb testing.TB, args ...string) *Agent {
	tb.Helper()
	dir := tb.TempDir()
	a := &Agent{Socket: filepath.Join(dir, "run", "agent.sock"), Home: filepath.Join(dir, "home")}
	if err := os.MkdirAll(a.Home, 0o755); err != nil {
		tb.Fatal(err)
	}
	a.Cmd = exec.Command(testenv.AgentBinary(tb), append([]string{"--socket", a.Socket, "--home", a.Home}, args...)...)
	a.Cmd.Env = append(os.Environ(), "MPLCONFIGDIR="+filepath.Join(dir, "mpl"))
	if g := os.Getenv("SANDLOT_T_GMP"); g != "" {
		a.Cmd.Env = append(a.Cmd.Env, "GOMAXPROCS="+g)
	}
	if testing.Verbose() {
		a.Cmd.Stderr = os.Stderr
	}
	if err := a.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = a.Cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = a.Cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = a.Cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(a.Socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatal("agent socket did not appear")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return a
}

// Dial connects a Client that is closed at the end of the test.
func (a *Agent) Dial(tb testing.TB) *agent.Client {
	tb.Helper()
	var c *agent.Client
	var err error
	for i := 0; i < 200; i++ { // the socket file appears just before listen(2)
		if c, err = agent.Dial(context.Background(), a.Socket, agent.ClientConfig{SandboxID: "test"}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// StartClient starts an agent and dials it.
func StartClient(tb testing.TB) (*agent.Client, *Agent) {
	a := Start(tb)
	return a.Dial(tb), a
}
