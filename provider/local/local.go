// Package local is the contexts.Provider that runs sandboxes on this host:
// an OCI container (runtime/oci) whose PID 1 is sandlot-agent, reached over
// the runtime's channel (runtime.Runtime.Dial), which no sandbox can
// redirect. Each sandbox gets a key of its own that only its agent is
// given; every connection opens with a handshake in which both sides prove
// it (agent.HostHandshake). The channel and the key outlive the daemon, so
// a new daemon process reattaches to running sandboxes by id.
//
// Layout under the state directory: see runtime/oci; the agent binary is
// installed in the runtime's share (agentbin.go).
package local

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/internal/logkey"
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
	// NoMemory keeps a suspend to the sandbox's files even where the
	// runtime could checkpoint its memory (runsc with the state dir on a
	// disk: CapMemory, the default there). Sessions on a channel a
	// restore reopened are sealed (docs/security-walls-sandbox.md, "The channel across
	// a restore"), so keeping memory is no longer a trade of safety.
	NoMemory bool
	// StateDir holds bundles, keys and runtime state; "": /run/sandlot.
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
	// ReadyTimeout bounds create-to-healthy; 0: 15 s. Time spent waiting
	// for a creation slot (MaxCreating) does not count against it.
	ReadyTimeout time.Duration
	// Networks builds the networks of sandboxes that ask for one
	// (contexts.Spec.Network); nil refuses them.
	Networks Networks
	// MaxCreating bounds the sandboxes being created at once; more wait
	// (for as long as their caller's context allows) rather than share
	// the CPU so thinly that none gets ready in time. 0: the number of
	// CPUs, at least 2.
	MaxCreating int
	// Images is the store templates are looked up in (template.go): a
	// sandbox's root is its template's image under a writable layer of
	// its own. nil: every sandbox runs on the host template.
	Images *image.Store
	// HostTemplate enables the template named "host" (the host's /usr,
	// read-only, without /usr/local) beside the store's images. Never the
	// default.
	HostTemplate bool
	// Templates, when set, says what contexts.Spec.Template is: a
	// template id, whose image and settings (env, workdir, user, kernels,
	// resources, start command) the sandbox gets; "default" and "host"
	// stay the built-ins. nil: Spec.Template names an image in Images.
	Templates Templates
	// Missing, when set, says why a template the store lacks cannot be
	// used yet (the default template while it is being built: unavailable);
	// nil from it: not_found.
	Missing func(template string) error
	// Volumes opens the volumes sandboxes mount (contexts.Spec.Volumes);
	// nil refuses them.
	Volumes Volumes
	// Logger; nil discards.
	Logger *slog.Logger
}

// Provider runs sandboxes with an OCI runtime. Safe for concurrent use.
type Provider struct {
	rt *oci.Runtime
	// restoreHook, when set (tests, before the Restore it is for), runs
	// between a restore and its first connection: an attack test holds
	// the daemon there until the sandbox's own code has taken the
	// reopened channel, so that code wins its race.
	restoreHook func(sandboxID string)
	// createHook, when set (tests), learns each create's sandbox id as
	// soon as it is chosen: a create that fails names none, and a test
	// that cancels creates checks that nothing of the id is left.
	createHook   func(sandboxID string)
	images       *image.Store
	hostTemplate bool
	keepMemory   bool // not Config.NoMemory
	missing      func(string) error
	templates    Templates
	stateDir     string
	agentSrc     string // the agent binary given to New
	agentMu      sync.Mutex
	// agentPath is the agent's copy in the runtime's share; under agentMu.
	agentPath string
	limits    contexts.Limits
	prestart  []string
	ready     time.Duration
	nets      Networks
	volumes   Volumes
	creating  chan struct{} // one token per creation under way
	// building holds the ids of the build-step sandboxes this process runs
	// (build.go); List leaves them out.
	building sync.Map
	log      *slog.Logger
}

var _ contexts.Provider = (*Provider)(nil)

// New selects the runtime (probing it when auto) and prepares the state
// directory. It fails with errdefs.ErrFailedPrecondition when no runtime or
// agent binary is usable.
func New(cfg Config) (*Provider, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
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
	installed, err := installAgent(agentPath, rt.ShareDir(), rt.AgentMode())
	if err != nil {
		return nil, err
	}
	p := &Provider{
		rt:           rt,
		images:       cfg.Images,
		hostTemplate: cfg.HostTemplate,
		keepMemory:   !cfg.NoMemory,
		missing:      cfg.Missing,
		templates:    cfg.Templates,
		stateDir:     rt.StateDir(),
		agentSrc:     agentPath,
		agentPath:    installed,
		limits:       cfg.Limits,
		prestart:     cfg.Prestart,
		ready:        cfg.ReadyTimeout,
		nets:         cfg.Networks,
		volumes:      cfg.Volumes,
		log:          log,
	}
	if p.ready <= 0 {
		p.ready = 15 * time.Second
	}
	n := cfg.MaxCreating
	if n <= 0 {
		n = max(2, goruntime.NumCPU())
	}
	p.creating = make(chan struct{}, n)
	p.dropStaleForks()
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

// Capabilities implements contexts.Provider: every runtime pauses (with
// the sandbox's memory) and reports usage; runsc also checkpoints a
// sandbox's memory to disk (checkpoint.go).
func (p *Provider) Capabilities() contexts.Capabilities {
	caps := contexts.CapPause | contexts.CapUsage | contexts.CapSnapshot
	if p.keepMemory && p.rt.CanCheckpoint() {
		caps |= contexts.CapMemory
	}
	return caps
}

// Runtime returns the runtime in use (for its name and Stats).
func (p *Provider) Runtime() runtime.Runtime { return p.rt }

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
// agent and returns it connected (a *Sandbox).
func (p *Provider) Create(ctx context.Context, spec contexts.Spec) (_ contexts.Sandbox, err error) {
	t0 := time.Now()
	if _, err := agent.SandboxEnv(spec.Env); err != nil {
		return nil, fmt.Errorf("sandbox env: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if spec.Network != nil && p.nets == nil {
		return nil, fmt.Errorf("sandbox networks are not enabled on this daemon: %w", errdefs.ErrFailedPrecondition)
	}
	if err := p.canRestoreFork(spec); err != nil {
		return nil, err
	}
	agentBin, err := p.agentCopy()
	if err != nil {
		return nil, err
	}
	release, err := p.slot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	tmpl, err := p.resolve(ctx, spec.Template)
	if err != nil {
		return nil, err
	}
	defer tmpl.release()
	userArg, err := tmpl.userArg()
	if err != nil {
		return nil, err
	}
	// The image's environment, then the template's, then the spec's.
	merged := tmpl.env
	if merged == nil {
		merged = map[string]string{}
	}
	for k, v := range tmpl.settings.Env {
		merged[k] = v
	}
	for k, v := range spec.Env {
		merged[k] = v
	}
	id := runtime.NewID()
	if p.createHook != nil {
		p.createHook(id)
	}
	start := time.Now()
	defer func() {
		if err != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if derr := p.Destroy(dctx, id); derr != nil {
				p.log.Warn("cleanup after failed create", logkey.Sandbox, id, logkey.Err, derr)
			}
		}
	}()
	var rn *runtime.Network
	userEnv := merged
	if spec.Network != nil {
		var netEnv map[string]string
		if rn, netEnv, err = p.nets.Setup(ctx, id, spec.Labels[contexts.LabelTenant], spec.Labels[contexts.LabelContext], *spec.Network); err != nil {
			return nil, err
		}
		userEnv = networkEnv(merged, rn, netEnv)
	}
	env, err := agent.SandboxEnv(userEnv)
	if err != nil {
		return nil, fmt.Errorf("sandbox env: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	labels := make(map[string]string, len(spec.Labels)+1)
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if spec.Template != "" {
		labels["template"] = spec.Template
	}
	if tmpl.root != nil {
		labels[labelImage] = tmpl.image.String()
	}
	key := make([]byte, agent.KeySize)
	rand.Read(key)
	// The runtime hands the key to the agent alone, on fd 3 (runtime.Spec.Secret).
	home := oci.HomeDir
	if tmpl.settings.Workdir != "" {
		home = tmpl.settings.Workdir
	}
	args := []string{oci.AgentPath, "--socket", p.rt.Channel(), "--key-fd", "3", "--home", home}
	// and, where the runtime can, a pipe it closes once it listens, which
	// the host waits on before it dials (oci.Runtime.ReadyFD).
	ready := p.rt.ReadyFD() >= 0
	if ready {
		args = append(args, "--ready-fd", strconv.Itoa(p.rt.ReadyFD()))
	}
	if prestart := tmpl.prestart(p.prestart, spec.Prestart); len(prestart) > 0 {
		args = append(args, "--prestart", strings.Join(prestart, ","))
	}
	var user *runtime.User
	if tmpl.root != nil {
		// An image root has a root of its own (uid 0 of the sandbox's user
		// namespace, nobody on the host): the agent runs as it, so calls
		// can ask for root, and starts everything else as the user.
		user = &runtime.User{}
		args = append(args, "--root")
		if userArg != "" {
			args = append(args, "--user", userArg)
		}
		if tmpl.root.Sudo {
			args = append(args, "--sudo")
		}
	}
	vols, closeVols, err := p.openVolumes(ctx, spec, tmpl.root != nil)
	if err != nil {
		return nil, err
	}
	defer closeVols()
	rs := runtime.Spec{
		Volumes: vols,
		User:    user,
		ID:      id,
		Args:    args,
		Env:     env,
		Mounts: []runtime.Mount{
			{Source: agentBin, Destination: oci.AgentPath, ReadOnly: true},
		},
		Limits:  tmpl.limits(p.limitsFor(spec.Limits), spec.Limits),
		Labels:  labels,
		Secret:  key,
		Ready:   ready,
		Root:    tmpl.root,
		Network: rn,
	}
	ctx, cancel := context.WithTimeout(ctx, p.ready)
	defer cancel()
	if spec.MemoryCheckpoint != "" { // a fork with memory (fork.go)
		c, err := p.restoreFork(ctx, rs, spec.MemoryCheckpoint, tmpl.release)
		if err != nil {
			return nil, p.readyErr(ctx, id, err)
		}
		return &Sandbox{c}, nil
	}
	err = p.rt.Create(ctx, rs)
	created := time.Now()
	tmpl.release() // the bundle names the image now, for GC
	if err != nil {
		return nil, p.readyErr(ctx, id, err)
	}
	c, err := p.connect(ctx, id, key, true)
	if err != nil {
		return nil, p.readyErr(ctx, id, err)
	}
	if cmd := tmpl.settings.StartCmd; cmd != "" {
		p.startCmd(c, tmpl.name, cmd)
		if ready := tmpl.settings.ReadyCmd; ready != "" {
			p.waitReady(ctx, c, tmpl.name, ready)
		}
	}
	p.log.Debug("sandbox ready", logkey.Sandbox, id, logkey.Runtime, p.rt.Name(), logkey.Elapsed, time.Since(t0),
		"prepare", start.Sub(t0), "run", created.Sub(start), "agent", time.Since(created))
	return &Sandbox{c}, nil
}

// readyErr is a create's error, said as the timeout it is when the
// create-to-healthy bound (ready) ran out: the runtime only reports the
// process it had to kill.
func (p *Provider) readyErr(ctx context.Context, id string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the sandbox was not ready within the creation timeout (%s; %s: %v): %w", p.ready, id, err, errdefs.ErrDeadlineExceeded)
	}
	return err
}

// slot waits for one of the MaxCreating creation slots, for as long as
// ctx allows, and returns its release.
func (p *Provider) slot(ctx context.Context) (func(), error) {
	select {
	case p.creating <- struct{}{}:
		return func() { <-p.creating }, nil
	default:
	}
	start := time.Now()
	select {
	case p.creating <- struct{}{}:
		p.log.Debug("waited for a creation slot", logkey.Elapsed, time.Since(start))
		return func() { <-p.creating }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a sandbox creation slot (%d under way): %w", cap(p.creating), ctx.Err())
	}
}

// Attach implements contexts.Provider.
func (p *Provider) Attach(ctx context.Context, sandboxID string) (contexts.Sandbox, error) {
	if err := runtime.CheckID(sandboxID); err != nil {
		return nil, err
	}
	key, err := p.rt.Secret(sandboxID)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	c, err := p.connect(ctx, sandboxID, key, false)
	if err != nil {
		return nil, err
	}
	return &Sandbox{c}, nil
}

// List implements contexts.Provider: every sandbox in the state directory,
// running or not (a stopped one still needs Destroy), except the build
// steps this process runs: no context owns them, and the manager's sweep
// must not take them for orphans. A build step left by an earlier process
// is listed, so it is swept.
func (p *Provider) List(ctx context.Context) ([]string, error) {
	ids, err := p.rt.List(ctx)
	if err != nil {
		return nil, err
	}
	out := ids[:0]
	for _, id := range ids {
		if _, ok := p.building.Load(id); !ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// Destroy implements contexts.Provider.
func (p *Provider) Destroy(ctx context.Context, sandboxID string) error {
	if err := runtime.CheckID(sandboxID); err != nil {
		return err
	}
	if err := p.rt.Delete(ctx, sandboxID); err != nil {
		return err
	}
	// The sandbox's processes are gone: its network can go too.
	if p.nets != nil {
		return p.nets.Teardown(ctx, sandboxID)
	}
	return nil
}

// Pause implements contexts.Provider: the runtime freezes every process of
// the sandbox, the agent included, with its memory kept.
func (p *Provider) Pause(ctx context.Context, sandboxID string) error {
	if err := runtime.CheckID(sandboxID); err != nil {
		return err
	}
	return p.rt.Pause(ctx, sandboxID)
}

// Resume implements contexts.Provider.
func (p *Provider) Resume(ctx context.Context, sandboxID string) error {
	if err := runtime.CheckID(sandboxID); err != nil {
		return err
	}
	return p.rt.Resume(ctx, sandboxID)
}

// Stop sends SIGKILL to a sandbox's agent without removing it (tests,
// reconcile of wedged sandboxes) and returns once the runtime reads it
// stopped (its init exiting or gone): the kill itself returns when the
// signal is sent, before it is delivered. It waits at most stopWait
// (unavailable then).
func (p *Provider) Stop(ctx context.Context, sandboxID string) error {
	if err := p.rt.Kill(ctx, sandboxID, syscall.SIGKILL); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, stopWait)
	defer cancel()
	for delay := time.Millisecond; ; delay = min(delay*2, 50*time.Millisecond) {
		st, err := p.rt.State(ctx, sandboxID)
		if errors.Is(err, errdefs.ErrNotFound) || err == nil && st.Status == runtime.StatusStopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stop sandbox %s: still %v after the kill (%v): %w", sandboxID, stateOf(st), err, errdefs.ErrUnavailable)
		case <-time.After(delay):
		}
	}
}

// stopWait bounds Stop's wait for a killed sandbox's init to be reaped.
const stopWait = 10 * time.Second

// stateOf is st's status, or "unknown" when there is no state.
func stateOf(st *runtime.State) string {
	if st == nil {
		return "unknown"
	}
	return string(st.Status)
}

// Usage implements contexts.Provider: a sandbox's resource usage, memory,
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
	u := contexts.ResourceUsage{MemoryBytes: st.MemoryBytes, CacheBytes: st.CacheBytes, CPUTimeMs: st.CPUTime.Milliseconds(), PIDs: st.PIDs}
	// The runtime knows where the tmpfs mounts can be read (under runsc
	// only from inside the sandbox).
	if n, err := p.rt.DiskUsage(ctx, sandboxID, oci.HomeDir, "/tmp"); err == nil {
		u.DiskBytes = n
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
