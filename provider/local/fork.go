package local

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/runtime"
)

// Fork with memory (runsc; docs/state.md, "Fork with memory"). The
// source's agent releases its channel, runsc saves the source's kernel
// and leaves it running (oci.Runtime.ForkCheckpoint), and the source is
// reconnected over a sealed session (its channel was reopened). Each fork
// is a Create whose Spec.MemoryCheckpoint names that checkpoint: a sandbox of its
// own restores it (oci.Runtime.RestoreFork). Its agent is the source's
// and holds the source's key: the host proves that key once, over a
// sealed session, gives the agent the fork's own key (channel.rekey), and
// from then on only the fork's key opens it. The checkpoint, and the
// source's key kept beside it, are deleted by DropForkCheckpoint.

// forkDirName is a fork checkpoint's name: the only names Spec.MemoryCheckpoint
// and DropForkCheckpoint accept, so neither reaches outside forksDir.
var forkDirName = regexp.MustCompile(`^fk-[a-z0-9]{26}$`)

// forkKeyFile, in a fork checkpoint, is the source's key.
const forkKeyFile = "source.key"

// forkTenantFile, in a fork checkpoint, names the source's tenant: only
// a create of that tenant's restores it (restoreFork), so a checkpoint's
// name, were it learned, opens no other tenant's way to the memory.
const forkTenantFile = "tenant"

func (p *Provider) forksDir() string { return filepath.Join(p.rt.StateDir(), "forks") }

func (p *Provider) forkDir(name string) (string, error) {
	if !forkDirName.MatchString(name) {
		return "", fmt.Errorf("fork checkpoint %q: %w", name, errdefs.ErrNotFound)
	}
	return filepath.Join(p.forksDir(), name), nil
}

// ForkCheckpoint implements contexts.Provider: running sandbox
// sandboxID's memory is saved for forks and it runs on, reconnected.
// Under crun and runc, or with Config.NoMemory: NotSupported. (A source
// with a network or volumes checkpoints, but no fork's spec matches it:
// its restore is refused, and the caller forks files.)
func (p *Provider) ForkCheckpoint(ctx context.Context, sandboxID string) (_ string, _ contexts.Sandbox, err error) {
	if err := runtime.CheckID(sandboxID); err != nil {
		return "", nil, err
	}
	if !p.keepMemory || !p.rt.CanCheckpoint() {
		return "", nil, contexts.NotSupported(p.Name()+" on "+p.rt.Name(), contexts.CapMemory)
	}
	key, err := p.rt.Secret(sandboxID)
	if err != nil {
		return "", nil, fmt.Errorf("sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	if err := os.MkdirAll(p.forksDir(), 0o700); err != nil {
		return "", nil, err
	}
	name := "fk-" + strings.ToLower(rand.Text())
	dir := filepath.Join(p.forksDir(), name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, forkKeyFile), key, 0o600); err != nil {
		return "", nil, err
	}
	st, err := p.rt.State(ctx, sandboxID)
	if err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, forkTenantFile), []byte(st.Labels[contexts.LabelTenant]), 0o600); err != nil {
		return "", nil, err
	}
	// Everything that may refuse comes before the release: after it, the
	// source is reachable again only once its channel reopens.
	if err := p.rt.PrepareForkCheckpoint(ctx, sandboxID, dir); err != nil {
		return "", nil, err
	}
	c, err := p.connect(ctx, sandboxID, key, false)
	if err != nil {
		return "", nil, err
	}
	err = p.release(ctx, c, false)
	c.Close()
	if err != nil {
		// The agent may have let go though its answer was lost: open the
		// channel so that it can listen again.
		if rerr := p.rt.ReopenChannel(sandboxID); rerr != nil {
			p.log.Warn("fork checkpoint: reopen the channel after a failed release", logkey.Sandbox, sandboxID, logkey.Err, rerr)
		}
		return "", nil, fmt.Errorf("sandbox %s: release the channel: %w", sandboxID, err)
	}
	cerr := p.rt.ForkCheckpoint(ctx, sandboxID, dir)
	// The source runs on either way: its released agent listens again.
	rctx, cancel := context.WithTimeout(ctx, p.ready)
	defer cancel()
	src, err := p.connect(rctx, sandboxID, key, true)
	if err != nil {
		if cerr != nil {
			return "", nil, fmt.Errorf("sandbox %s after its failed fork checkpoint (%v): %w", sandboxID, cerr, err)
		}
		return "", nil, fmt.Errorf("sandbox %s after its fork checkpoint: %w", sandboxID, err)
	}
	if cerr != nil {
		// The source's old connection closed with the release: this one
		// is the caller's (contexts.Provider.ForkCheckpoint).
		return "", &Sandbox{src}, cerr
	}
	return name, &Sandbox{src}, nil
}

// dropStaleForks, at start, deletes the fork checkpoints an earlier
// process left (it ended between a checkpoint and its forks): each holds
// a source's whole memory and its key, and no fork can come of it now.
func (p *Provider) dropStaleForks() {
	ents, _ := os.ReadDir(p.forksDir())
	for _, e := range ents {
		if forkDirName.MatchString(e.Name()) {
			_ = os.RemoveAll(filepath.Join(p.forksDir(), e.Name()))
		}
	}
}

// DropForkCheckpoint implements contexts.Provider.
func (p *Provider) DropForkCheckpoint(_ context.Context, name string) error {
	dir, err := p.forkDir(name)
	if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// canRestoreFork refuses a Create from a fork checkpoint that cannot be
// one: the source's own network and volumes are not the fork's.
func (p *Provider) canRestoreFork(spec contexts.Spec) error {
	if spec.MemoryCheckpoint != "" && (spec.Network != nil || len(spec.Volumes) > 0 || !p.keepMemory || !p.rt.CanCheckpoint()) {
		return errdefs.Sentence(errdefs.ErrFailedPrecondition, "a fork with memory takes no network or volumes, and runs on runsc keeping memory")
	}
	return nil
}

// restoreFork is Create's end for a fork with memory: rs (the fork's
// spec, key and all) restored from checkpoint name, rekeyed, connected.
// release lets go of the template once the bundle names it.
func (p *Provider) restoreFork(ctx context.Context, rs runtime.Spec, name string, release func()) (*agent.Client, error) {
	defer release()
	dir, err := p.forkDir(name)
	if err != nil {
		return nil, err
	}
	tenant, err := os.ReadFile(filepath.Join(dir, forkTenantFile))
	if err != nil || string(tenant) != rs.Labels[contexts.LabelTenant] {
		// Another tenant's is as good as absent to this one.
		return nil, fmt.Errorf("fork checkpoint %s: %w", name, errdefs.ErrNotFound)
	}
	srcKey, err := os.ReadFile(filepath.Join(dir, forkKeyFile))
	if err != nil {
		return nil, fmt.Errorf("fork checkpoint %s: %v: %w", name, err, errdefs.ErrNotFound)
	}
	// The saved process is the source's: the fork's spec says so, and the
	// comparison refuses any other difference (oci forkspec.go).
	args, env, err := p.rt.CheckpointProcess(dir)
	if err != nil {
		return nil, err
	}
	rs.Args = args
	rs.Env = map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		rs.Env[k] = v
	}
	if err := p.rt.RestoreFork(ctx, rs, dir); err != nil {
		return nil, err
	}
	c, err := p.connect(ctx, rs.ID, srcKey, true)
	if err != nil {
		return nil, err
	}
	// Before anything else: the fork's own key, over this sealed session.
	err = c.Rekey(ctx, rs.Secret)
	c.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: rekey the fork: %w", rs.ID, err)
	}
	return p.connect(ctx, rs.ID, rs.Secret, false)
}
