// Package toolstest runs the tools against real sandlot-agent processes on
// the host, without a container runtime: HostProvider is a
// contexts.Provider whose sandboxes are agent processes, each with its own
// home directory and socket under a test temp dir. Kernels, files and exec
// are the real agent's; only the isolation is missing, so it is for tests.
package toolstest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

// RequirePython skips the test when /usr/bin/python3 is absent, unless
// CI=true, where that is a failure.
func RequirePython(tb testing.TB) {
	tb.Helper()
	_, err := os.Stat("/usr/bin/python3")
	testenv.Require(tb, err == nil, "/usr/bin/python3")
}

// HostProvider runs each sandbox as a sandlot-agent host process.
type HostProvider struct {
	tb  testing.TB
	bin string
	dir string

	mu    sync.Mutex
	seq   int
	procs map[string]*hostAgent
}

type hostAgent struct {
	cmd    *exec.Cmd
	socket string
	home   string
	done   chan struct{}
}

var _ contexts.Provider = (*HostProvider)(nil)

// NewHostProvider returns a provider whose agents are stopped at the end
// of the test.
func NewHostProvider(tb testing.TB) *HostProvider {
	p := &HostProvider{tb: tb, bin: testenv.AgentBinary(tb), dir: tb.TempDir(), procs: map[string]*hostAgent{}}
	tb.Cleanup(func() {
		p.mu.Lock()
		ids := make([]string, 0, len(p.procs))
		for id := range p.procs {
			ids = append(ids, id)
		}
		p.mu.Unlock()
		for _, id := range ids {
			p.Destroy(context.Background(), id)
		}
	})
	return p
}

// Name implements contexts.Provider.
func (p *HostProvider) Name() string { return "host" }

// Capabilities implements contexts.Provider: none of the optional
// operations (a host process has no cgroup of its own to freeze or read).
func (p *HostProvider) Capabilities() contexts.Capabilities { return 0 }

// Pause implements contexts.Provider: not supported.
func (p *HostProvider) Pause(ctx context.Context, id string) error {
	return contexts.NotSupported(p.Name(), contexts.CapPause)
}

// Resume implements contexts.Provider: not supported.
func (p *HostProvider) Resume(ctx context.Context, id string) error {
	return contexts.NotSupported(p.Name(), contexts.CapPause)
}

// Usage implements contexts.Provider: not supported.
func (p *HostProvider) Usage(ctx context.Context, id string) (contexts.ResourceUsage, error) {
	return contexts.ResourceUsage{}, contexts.NotSupported(p.Name(), contexts.CapUsage)
}

// Home returns the home directory of a sandbox ("" if unknown).
func (p *HostProvider) Home(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.procs[id]; ok {
		return a.home
	}
	return ""
}

// Create implements contexts.Provider.
func (p *HostProvider) Create(ctx context.Context, spec contexts.Spec) (contexts.Sandbox, error) {
	p.mu.Lock()
	p.seq++
	id := fmt.Sprintf("host-%d", p.seq)
	p.mu.Unlock()
	dir := filepath.Join(p.dir, id)
	a := &hostAgent{socket: filepath.Join(dir, "run", "agent.sock"), home: filepath.Join(dir, "home"), done: make(chan struct{})}
	if err := os.MkdirAll(a.home, 0o755); err != nil {
		return nil, err
	}
	a.cmd = exec.Command(p.bin, "--socket", a.socket, "--home", a.home)
	a.cmd.Env = append(os.Environ(), "MPLCONFIGDIR="+filepath.Join(dir, "mpl"))
	for k, v := range spec.Env {
		a.cmd.Env = append(a.cmd.Env, k+"="+v)
	}
	if testing.Verbose() {
		a.cmd.Stderr = os.Stderr
	}
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent: %v: %w", err, errdefs.ErrUnavailable)
	}
	go func() { a.cmd.Wait(); close(a.done) }()
	p.mu.Lock()
	p.procs[id] = a
	p.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := agent.Dial(ctx, a.socket, agent.ClientConfig{SandboxID: id})
		if err == nil {
			if err = c.Ping(ctx); err == nil {
				return c, nil
			}
			c.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Destroy(context.Background(), id)
			return nil, fmt.Errorf("agent %s did not come up: %v: %w", id, err, errdefs.ErrUnavailable)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Attach implements contexts.Provider.
func (p *HostProvider) Attach(ctx context.Context, id string) (contexts.Sandbox, error) {
	p.mu.Lock()
	a, ok := p.procs[id]
	p.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return agent.Dial(ctx, a.socket, agent.ClientConfig{SandboxID: id})
}

// List implements contexts.Provider.
func (p *HostProvider) List(ctx context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.procs))
	for id := range p.procs {
		ids = append(ids, id)
	}
	return ids, nil
}

// Destroy implements contexts.Provider: SIGTERM, then SIGKILL after 5 s.
func (p *HostProvider) Destroy(ctx context.Context, id string) error {
	p.mu.Lock()
	a, ok := p.procs[id]
	delete(p.procs, id)
	p.mu.Unlock()
	if !ok {
		return nil
	}
	_ = a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.done:
	case <-time.After(5 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
	return nil
}

// FakeOpenAIKey returns a random OpenAI-shaped key, made at test time so no
// real-looking secret is committed.
func FakeOpenAIKey() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 48)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "sk-proj-" + string(b)
}
