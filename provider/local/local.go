// Package local is the contexts.Provider that runs sandboxes on this host:
// an OCI container (runtime/oci) whose PID 1 is sandlot-agent, reached over
// a unix socket in a per-sandbox host directory. The socket outlives the
// daemon, so a new daemon process reattaches to running sandboxes by id.
//
// Layout under the state directory (see runtime/oci for the rest):
//
//	sandboxes/<id>/agent.sock  bind-mounted at /run/sandlot in the sandbox
package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci"
)

// Name is the provider name stored in contexts.Record.Provider.
const Name = "local"

// AgentEnv names the environment variable that locates the agent binary
// when none is configured and none sits beside the running executable.
const AgentEnv = "SANDLOT_AGENT_BIN"

// Config configures a Provider. The zero value is usable when the agent
// binary can be found.
type Config struct {
	// Runtime is auto (""), crun, runc or runsc.
	Runtime string
	// StateDir holds bundles, sockets and runtime state; "": /run/sandlot.
	StateDir string
	// AgentPath is the host path of the static sandlot-agent binary. "":
	// sandlot-agent beside os.Executable(), else $SANDLOT_AGENT_BIN.
	AgentPath string
	// Limits are the defaults for zero fields of contexts.Spec.Limits;
	// zero fields here mean runtime's defaults (2 GiB, 256 pids, 1 CPU,
	// 512 MiB tmpfs).
	Limits contexts.Limits
	// Prestart names kernels the agent starts at boot ("python",
	// "javascript", ...), so the first call does not wait for one. Each
	// costs its idle memory in every sandbox; nil starts none.
	Prestart []string
	// ReadyTimeout bounds create-to-healthy; 0: 15 s.
	ReadyTimeout time.Duration
	// Logger; nil: slog.Default().
	Logger *slog.Logger
}

// Provider runs sandboxes with an OCI runtime. Safe for concurrent use.
type Provider struct {
	rt        runtime.Runtime
	stateDir  string
	agentPath string
	limits    contexts.Limits
	prestart  []string
	ready     time.Duration
	log       *slog.Logger
}

var _ contexts.Provider = (*Provider)(nil)

// New selects the runtime (probing it when auto) and prepares the state
// directory. It fails with errdefs.ErrFailedPrecondition when no runtime or
// agent binary is usable.
func New(cfg Config) (*Provider, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	agentPath, err := findAgent(cfg.AgentPath)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := oci.New(ctx, oci.Config{Runtime: cfg.Runtime, StateDir: cfg.StateDir, Logger: log})
	if err != nil {
		return nil, err
	}
	installed, err := installAgent(agentPath, rt.StateDir(), rt.AgentMode())
	if err != nil {
		return nil, err
	}
	p := &Provider{
		rt:        rt,
		stateDir:  rt.StateDir(),
		agentPath: installed,
		limits:    cfg.Limits,
		prestart:  cfg.Prestart,
		ready:     cfg.ReadyTimeout,
		log:       log,
	}
	if p.ready <= 0 {
		p.ready = 15 * time.Second
	}
	// 0700: the sandbox user is uid 1000 on the host too; host processes
	// of that uid must not reach the sockets. Sandboxes see only their own
	// directory, through the bind mount.
	sbDir := filepath.Join(p.stateDir, "sandboxes")
	if err := os.MkdirAll(sbDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if err := os.Chmod(sbDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	return p, nil
}

func findAgent(p string) (string, error) {
	var cands []string
	if p != "" {
		cands = []string{p}
	} else {
		if exe, err := os.Executable(); err == nil {
			cands = append(cands, filepath.Join(filepath.Dir(exe), "sandlot-agent"))
		}
		if env := os.Getenv(AgentEnv); env != "" {
			cands = append(cands, env)
		}
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return filepath.Abs(c)
		}
	}
	return "", fmt.Errorf("sandlot-agent binary not found (tried %q; set %s): %w", cands, AgentEnv, errdefs.ErrFailedPrecondition)
}

// Name implements contexts.Provider.
func (p *Provider) Name() string { return Name }

// Runtime returns the runtime in use (for its name and Stats).
func (p *Provider) Runtime() runtime.Runtime { return p.rt }

func (p *Provider) sockDir(id string) string { return filepath.Join(p.stateDir, "sandboxes", id) }

// SocketPath is the host path of a sandbox's agent socket.
func (p *Provider) SocketPath(id string) string {
	return filepath.Join(p.sockDir(id), agent.SocketName)
}

func (p *Provider) limitsFor(l contexts.Limits) runtime.Limits {
	pick := func(a, b int64) int64 {
		if a > 0 {
			return a
		}
		return b
	}
	cpus := l.CPUs
	if cpus <= 0 {
		cpus = p.limits.CPUs
	}
	return runtime.Limits{
		MemoryBytes: pick(l.MemoryBytes, p.limits.MemoryBytes),
		PIDs:        pick(l.PIDs, p.limits.PIDs),
		CPUs:        cpus,
		DiskBytes:   pick(l.DiskBytes, p.limits.DiskBytes),
	}.WithDefaults()
}

// Create implements contexts.Provider: it starts a sandbox, waits for its
// agent and returns the connected *agent.Client.
func (p *Provider) Create(ctx context.Context, spec contexts.Spec) (_ contexts.Sandbox, err error) {
	env, err := agent.SandboxEnv(spec.Env)
	if err != nil {
		return nil, fmt.Errorf("sandbox env: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	id := runtime.NewID()
	start := time.Now()
	dir := p.sockDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if derr := p.Destroy(dctx, id); derr != nil {
				p.log.Warn("cleanup after failed create", "sandbox", id, "err", derr)
			}
		}
	}()
	if err := os.Chown(dir, oci.UID, oci.GID); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	labels := make(map[string]string, len(spec.Labels)+1)
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if spec.Template != "" {
		labels["template"] = spec.Template
	}
	sock := agent.SocketDir + "/" + agent.SocketName
	args := []string{oci.AgentPath, "--socket", sock, "--home", oci.HomeDir}
	if prestart := mergePrestart(p.prestart, spec.Prestart); len(prestart) > 0 {
		args = append(args, "--prestart", strings.Join(prestart, ","))
	}
	rs := runtime.Spec{
		ID:   id,
		Args: args,
		Env:  env,
		Mounts: []runtime.Mount{
			{Source: p.agentPath, Destination: oci.AgentPath, ReadOnly: true},
			{Source: dir, Destination: agent.SocketDir},
		},
		Limits: p.limitsFor(spec.Limits),
		Labels: labels,
	}
	ctx, cancel := context.WithTimeout(ctx, p.ready)
	defer cancel()
	if err := p.rt.Create(ctx, rs); err != nil {
		return nil, err
	}
	c, err := p.connect(ctx, id, true)
	if err != nil {
		return nil, err
	}
	p.log.Debug("sandbox ready", "sandbox", id, "runtime", p.rt.Name(), "elapsed", time.Since(start))
	return c, nil
}

// connect dials the agent, waiting for its socket when wait is set, and
// pings it.
func (p *Provider) connect(ctx context.Context, id string, wait bool) (*agent.Client, error) {
	path := p.SocketPath(id)
	cfg := agent.ClientConfig{SandboxID: id, Logger: p.log}
	// The agent binds its socket a few ms after the runtime returns. Poll
	// tightly (a failed dial of a missing path costs ~10 µs; at most 0.5 ms
	// is lost after the socket appears), and check now and then that the
	// sandbox has not died instead.
	delay := 50 * time.Microsecond
	nextCheck := time.Now().Add(100 * time.Millisecond)
	for {
		c, err := agent.Dial(ctx, path, cfg)
		if err == nil {
			if err = c.Ping(ctx); err == nil {
				return c, nil
			}
			c.Close()
		}
		if !wait || ctx.Err() != nil {
			return nil, p.unreachable(ctx, id, err)
		}
		if time.Now().After(nextCheck) {
			if st, serr := p.rt.State(ctx, id); serr != nil || st.Status != runtime.StatusRunning {
				return nil, p.unreachable(ctx, id, err)
			}
			nextCheck = time.Now().Add(250 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*3/2, 500*time.Microsecond)
	}
}

// unreachable classifies a failed connection: not_found when the sandbox
// is gone or stopped, unavailable when it runs but its agent does not answer.
func (p *Provider) unreachable(ctx context.Context, id string, cause error) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	st, err := p.rt.State(sctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err == nil && st.Status != runtime.StatusRunning {
		return fmt.Errorf("sandbox %s is %s: %w", id, st.Status, errdefs.ErrNotFound)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sandbox %s: agent not ready: %w", id, ctx.Err())
	}
	return fmt.Errorf("sandbox %s: agent: %v: %w", id, cause, errdefs.ErrUnavailable)
}

// Attach implements contexts.Provider.
func (p *Provider) Attach(ctx context.Context, sandboxID string) (contexts.Sandbox, error) {
	if err := runtime.CheckID(sandboxID); err != nil {
		return nil, err
	}
	if _, err := os.Stat(p.sockDir(sandboxID)); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	return p.connect(ctx, sandboxID, false)
}

// List implements contexts.Provider: every sandbox in the state directory,
// running or not (a stopped one still needs Destroy).
// A socket directory without a bundle (a crash mid-create) is listed too.
func (p *Provider) List(ctx context.Context) ([]string, error) {
	ids, err := p.rt.List(ctx)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	ents, _ := os.ReadDir(filepath.Join(p.stateDir, "sandboxes"))
	for _, e := range ents {
		if e.IsDir() && runtime.ValidID(e.Name()) && !seen[e.Name()] {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Destroy implements contexts.Provider.
func (p *Provider) Destroy(ctx context.Context, sandboxID string) error {
	if err := runtime.CheckID(sandboxID); err != nil {
		return err
	}
	if err := p.rt.Delete(ctx, sandboxID); err != nil {
		return err
	}
	if err := os.RemoveAll(p.sockDir(sandboxID)); err != nil {
		return fmt.Errorf("sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// Stop sends SIGKILL to a sandbox's agent without removing it (tests,
// reconcile of wedged sandboxes).
func (p *Provider) Stop(ctx context.Context, sandboxID string) error {
	return p.rt.Kill(ctx, sandboxID, syscall.SIGKILL)
}

// Usage samples a sandbox's resource usage (contexts' UsageSampler): memory,
// CPU time and pids from its cgroups, and the bytes used on its writable
// tmpfs mounts, seen through its init's root.
func (p *Provider) Usage(ctx context.Context, sandboxID string) (contexts.ResourceUsage, error) {
	if err := runtime.CheckID(sandboxID); err != nil {
		return contexts.ResourceUsage{}, err
	}
	st, err := p.rt.Stats(ctx, sandboxID)
	if err != nil {
		return contexts.ResourceUsage{}, err
	}
	u := contexts.ResourceUsage{MemoryBytes: st.MemoryBytes, CPUTimeMs: st.CPUTime.Milliseconds(), PIDs: st.PIDs}
	// The runtime knows where the tmpfs mounts can be read (under runsc
	// only from inside the sandbox).
	if du, ok := p.rt.(interface {
		DiskUsage(ctx context.Context, id string, paths ...string) (int64, error)
	}); ok {
		if n, err := du.DiskUsage(ctx, sandboxID, oci.HomeDir, "/tmp"); err == nil {
			u.DiskBytes = n
		}
	}
	return u, nil
}

// mergePrestart is the provider's boot kernels plus the spec's, once each.
func mergePrestart(base, extra []string) []string {
	out := append([]string(nil), base...)
	for _, k := range extra {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
