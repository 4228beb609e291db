package local

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/runtime"
	"github.com/sandlot/sandlot/runtime/oci"
)

// DefaultBuildAllow is the allowlist of a build step's network when the
// operator names none: Debian's mirror (apt-get) and npm's registry.
var DefaultBuildAllow = []string{"deb.debian.org", "security.debian.org", "registry.npmjs.org"}

// BuildConfig configures the sandboxes that run build steps. Zero values
// are documented per field.
type BuildConfig struct {
	// Network is the most a RUN step's network allows (the daemon's
	// build allowlist); each step gets the part of it that its build's
	// tenant's network cap allows (stepNetwork). nil: no network.
	// BuildNetwork(DefaultBuildAllow) is the usual choice; it needs
	// Config.Networks.
	Network *policy.Policy
	// Timeout bounds one RUN step, from create to exit; 0: 30 min.
	Timeout time.Duration
	// Limits bound each step's sandbox (memory, pids, CPUs); zero fields:
	// the provider's defaults. The step's layer is on the store's disk,
	// bounded by the builder's layer.Limits when it is read.
	Limits contexts.Limits
	// Tenant is whose steps these are when a step's request names none
	// (build.RunRequest.Tenant): its cap bounds the network, and it is
	// recorded with the network for the audit trail.
	Tenant string
}

// Images is the provider's image store (Config.Images), nil without one.
func (p *Provider) Images() *image.Store { return p.images }

// BuildNetwork is an allowlist policy of the given hosts (policy rule
// text: "deb.debian.org", "*.example.org:443").
func BuildNetwork(allow []string) (*policy.Policy, error) {
	p := &policy.Policy{Mode: policy.Allowlist}
	for _, a := range allow {
		r, err := policy.ParseRule(a)
		if err != nil {
			return nil, err
		}
		p.Allow = append(p.Allow, r)
	}
	return p, nil
}

// BuildRunner returns the build.Runner that runs each RUN step in a
// sandbox of its own: the step's layers (id-mapped, read-only) under the
// step's upper dir as its root, its own user namespace (the step's root
// is root of that namespace only), seccomp, the runtime's walls, no host
// path but the agent binary, and the network cfg allows. The agent is the
// sandbox's init, running as the step's user, and the command runs
// through it.
func (p *Provider) BuildRunner(cfg BuildConfig) build.Runner {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Minute
	}
	return &stepRunner{p: p, cfg: cfg}
}

type stepRunner struct {
	p   *Provider
	cfg BuildConfig
}

var _ build.Runner = (*stepRunner)(nil)

// Run implements build.Runner.
func (s *stepRunner) Run(ctx context.Context, req build.RunRequest) (_ build.RunResult, err error) {
	p := s.p
	if len(req.Args) == 0 {
		return build.RunResult{}, fmt.Errorf("build step: no command: %w", errdefs.ErrInvalidArgument)
	}
	if s.cfg.Network != nil && p.nets == nil {
		return build.RunResult{}, fmt.Errorf("build step: a network is configured for builds but sandbox networks are not enabled: %w", errdefs.ErrFailedPrecondition)
	}
	env := make(map[string]string, len(req.Env)+3)
	if req.UID == 0 {
		// The agent's defaults are the sandbox user's.
		env["HOME"], env["USER"], env["LOGNAME"] = "/root", "root", "root"
	}
	for _, kv := range req.Env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "" || strings.ContainsRune(v, 0) {
			return build.RunResult{}, fmt.Errorf("build step: environment variable %q: %w", k, errdefs.ErrInvalidArgument)
		}
		env[k] = v
	}
	dir := req.Dir
	if dir == "" {
		dir = "/"
	}
	agentBin, err := p.agentCopy()
	if err != nil {
		return build.RunResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	release, err := p.slot(ctx)
	if err != nil {
		return build.RunResult{}, err
	}
	defer release()

	id := runtime.NewID()
	p.building.Store(id, true)
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		defer p.building.Delete(id)
		if derr := p.Destroy(dctx, id); derr != nil {
			p.log.Warn("build step: cleanup", logkey.Sandbox, id, logkey.Err, derr)
			err = errors.Join(err, derr)
		}
	}()
	var rn *runtime.Network
	tenant := req.Tenant
	if tenant == "" {
		tenant = s.cfg.Tenant
	}
	if pol := s.stepNetwork(tenant); pol != nil {
		var netEnv map[string]string
		if rn, netEnv, err = p.nets.Setup(ctx, id, tenant, "build", *pol); err != nil {
			return build.RunResult{}, err
		}
		env = networkEnv(env, rn, netEnv)
	}
	key := make([]byte, agent.KeySize)
	rand.Read(key)
	rs := runtime.Spec{
		ID:     id,
		Args:   []string{oci.AgentPath, "--socket", p.rt.Channel(), "--key-fd", "3", "--home", dir},
		Mounts: []runtime.Mount{{Source: agentBin, Destination: oci.AgentPath, ReadOnly: true}},
		Limits: p.limitsFor(s.cfg.Limits),
		Labels: map[string]string{"build": "step"},
		Secret: key,
		Root:   &runtime.Root{Layers: req.Lower, Upper: req.Upper, Work: req.Work},
		// The agent is the step's user, so is everything it starts.
		User:    &runtime.User{UID: req.UID, GID: req.GID},
		Cwd:     dir,
		Network: rn,
	}
	cctx, ccancel := context.WithTimeout(ctx, p.ready)
	err = p.rt.Create(cctx, rs)
	if err == nil {
		var c *agent.Client
		if c, err = p.connect(cctx, id, key, true); err == nil {
			defer c.Close()
			ccancel()
			return s.exec(ctx, c, id, req, env, dir)
		}
	}
	ccancel()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The step's bound (from create to exit) ran out while its
		// sandbox started (a loaded machine): the step is past its time,
		// whatever the runtime said as it was ended.
		return build.RunResult{}, fmt.Errorf("build step sandbox: %v: %w", err, errdefs.ErrDeadlineExceeded)
	}
	return build.RunResult{}, fmt.Errorf("build step sandbox: %w", err)
}

// stepNetwork is the network of a RUN step of tenant's build: the
// daemon's build allowlist (BuildConfig.Network) where tenant's network
// cap allows all of it; else the allowlist's rules the cap allows, each
// on its own and, in order, as many together as the cap allows; nil (no
// network) when that leaves none. A step gets neither more than the
// allowlist nor more than the cap. Precondition: Network is nil or
// p.nets is set.
func (s *stepRunner) stepNetwork(tenant string) *policy.Policy {
	base := s.cfg.Network
	if base == nil {
		return nil
	}
	if s.p.nets.Check(tenant, *base) == nil {
		return base
	}
	if base.Mode.Normalize() != policy.Allowlist {
		return nil
	}
	p := base.Clone()
	p.Allow = nil
	for _, r := range base.Allow {
		one := base.Clone()
		one.Allow = []policy.Rule{r}
		if s.p.nets.Check(tenant, one) == nil {
			p.Allow = append(p.Allow, r)
		}
	}
	for len(p.Allow) > 0 && s.p.nets.Check(tenant, p) != nil {
		p.Allow = p.Allow[:len(p.Allow)-1]
	}
	if len(p.Allow) == 0 {
		return nil
	}
	return &p
}

func (s *stepRunner) exec(ctx context.Context, c *agent.Client, id string, req build.RunRequest, env map[string]string, dir string) (build.RunResult, error) {
	out := req.Output
	if out == nil {
		out = io.Discard
	}
	res, err := c.Exec(ctx, agent.ExecParams{
		Argv: req.Args, Env: env, Cwd: dir,
		TimeoutMs: -1,   // ctx bounds it
		MaxOutput: 4096, // the output streams; the result keeps little
		Stream:    true,
	}, func(ev agent.OutputEvent) {
		if ev.Stream == agent.Stdout || ev.Stream == agent.Stderr {
			io.WriteString(out, ev.Data)
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return build.RunResult{}, fmt.Errorf("build step: %s: %w", ctx.Err(), errdefs.ErrDeadlineExceeded)
		}
		return build.RunResult{}, err
	}
	code := res.ExitCode
	if code == 0 && res.Signal != "" {
		code = 128
	}
	if res.Signal != "" {
		fmt.Fprintf(out, "\nkilled by %s\n", res.Signal)
	}
	st, err := s.p.rt.State(ctx, id)
	if err != nil {
		return build.RunResult{}, err
	}
	return build.RunResult{ExitCode: code, HostIDBase: st.IDBase}, nil
}
