package contexts

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// Limits for one sandbox. Zero values mean the provider's defaults.
type Limits struct {
	MemoryBytes int64   // default 2 GiB
	PIDs        int64   // default 256
	CPUs        float64 // CPU quota in cores; default 1
	DiskBytes   int64   // tmpfs size for /home/user and /tmp; default 512 MiB
}

// Spec describes a sandbox to create.
type Spec struct {
	Template string
	Limits   Limits
	Env      map[string]string
	Prestart []string          // kernels the sandbox starts at boot (a pooled sandbox's python); providers without kernels ignore it
	Labels   map[string]string // tenant, context id: for reconcile and E2B metadata
	TTL      time.Duration     // providers with their own expiry (E2B) use it
	// Network asks for a network of the sandbox's own under this policy
	// (docs/network.md): egress as the policy allows, its ports reachable
	// through the daemon. nil: loopback only, nothing in or out. A
	// provider that cannot give one fails with errdefs.ErrFailedPrecondition.
	Network *policy.Policy
	// Volumes are mounted into the sandbox (VolumeMount). A provider that
	// cannot mount them fails with errdefs.ErrFailedPrecondition.
	Volumes []VolumeMount
	// MemoryCheckpoint, when set, is a fork checkpoint (Checkpointer.ForkCheckpoint)
	// the sandbox is restored from instead of starting: its processes and
	// memory are the source's, its host identity its own. The spec must
	// ask for what the source's did, or the create fails (failed
	// precondition) and the caller forks files only.
	MemoryCheckpoint string
}

// Labels the Manager puts on every sandbox it creates (Spec.Labels).
const (
	LabelTenant  = "sandlot.tenant"
	LabelContext = "sandlot.context"
)

// Provider creates, finds and operates sandboxes. Implementations:
// provider/local (OCI), provider/e2b, provider/chain.
//
// Every operation of the contract is a method, the ones a provider may not
// be able to perform included: a wrapper (provider/chain) must forward
// each one to compile, so none can be lost behind it as a type assertion
// on the wrapper would lose it. A provider answers an operation it cannot
// perform with NotSupported (failed_precondition: "pause is not supported
// by provider e2b"), and Capabilities says so beforehand, so that the
// manager and the edges refuse up front instead of failing halfway.
// Operations act on a sandbox by id, with or without a connection to it,
// so they work on a sandbox another process created (after a restart,
// another node's). docs/contexts.md, "The provider contract".
type Provider interface {
	// Name is the provider's name as stored in Record.Provider.
	Name() string
	// Capabilities reports which optional operations this provider
	// performs; the others answer NotSupported.
	Capabilities() Capabilities
	// Create starts a sandbox and returns it connected and healthy.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Attach reconnects to a running sandbox by id (after a daemon
	// restart). errdefs.ErrNotFound when it is gone.
	Attach(ctx context.Context, sandboxID string) (Sandbox, error)
	// List returns the ids of the sandboxes this provider runs for sandlot.
	List(ctx context.Context) ([]string, error)
	// Destroy stops and removes a sandbox and everything it left on the
	// host. Destroying an unknown id is not an error.
	Destroy(ctx context.Context, sandboxID string) error
	Pauser       // CapPause
	UsageSampler // CapUsage
	Capturer     // CapSnapshot (snapshot.go)
	Checkpointer // CapMemory
}

// Checkpointer keeps a stopped sandbox's memory (its kernels, variables,
// processes) on the provider's disk: provider/local under runsc (gVisor's
// checkpoint). Manager.Suspend uses it where it can, so that a woken
// context keeps its kernels (docs/state.md).
type Checkpointer interface {
	// Checkpoint saves the sandbox's memory and stops it: nothing of it
	// runs on the host until Restore; Destroy removes it, checkpoint
	// included. Every connection to it ends.
	Checkpoint(ctx context.Context, sandboxID string) error
	// Restore starts a checkpointed sandbox again with its memory as it
	// was and returns it connected.
	Restore(ctx context.Context, sandboxID string) (Sandbox, error)
	// ForkCheckpoint saves a running sandbox's memory for forks
	// (Spec.MemoryCheckpoint) and leaves it running; every connection to it ends,
	// and it is returned connected again. A checkpoint that fails may
	// still return the source connected again (its old connections ended
	// all the same); a nil source then means "attach it again".
	// DropForkCheckpoint deletes the checkpoint once the forks are made.
	ForkCheckpoint(ctx context.Context, sandboxID string) (checkpoint string, source Sandbox, err error)
	DropForkCheckpoint(ctx context.Context, checkpoint string) error
}

// Pauser freezes a sandbox and thaws it again with its memory kept
// (provider/local: the runtime's pause). Both work by id, with or without
// a connection to the sandbox, so a paused sandbox survives a daemon
// restart and is resumed by the next process. Resuming a sandbox that
// runs is failed_precondition; one that is gone is not_found.
type Pauser interface {
	Pause(ctx context.Context, sandboxID string) error
	Resume(ctx context.Context, sandboxID string) error
}

// UsageSampler samples a sandbox's resource usage now. The cleanup loop
// stores a sample on the records of the contexts a manager serves, and
// Manager.Usage reads one live.
type UsageSampler interface {
	Usage(ctx context.Context, sandboxID string) (ResourceUsage, error)
}

// Capabilities is a set of the optional operations of the Provider
// contract, one bit each.
type Capabilities uint

// The optional operations. Adding one is a method on Provider (every
// provider then answers it, if only with NotSupported), a bit here and
// its name in capNames.
const (
	CapPause Capabilities = 1 << iota // Pause and Resume, memory kept
	CapUsage                          // Usage
	// CapShared: every node on the store reaches this provider's
	// sandboxes by id (Attach, Destroy and the rest), and List names
	// every node's (kubernetes pods, an E2B account). Not an operation
	// but a fact the manager needs: with it, any node serves any
	// context, and the work over every node's contexts (expiry, lost
	// records, the sweep, the warm pool) runs on the holder of the
	// cluster lease. docs/contexts-nodes.md, "Nodes".
	CapShared
	// CapSnapshot: Capture, a sandbox's filesystem as a layer.
	CapSnapshot
	// CapMemory: Checkpoint and Restore, a sandbox's memory kept on disk.
	// A wrapper's union may claim it for some of its sandboxes only: an
	// operation on another answers NotSupported.
	CapMemory
)

var capNames = []struct {
	c    Capabilities
	name string
}{
	{CapPause, "pause"},
	{CapUsage, "usage"},
	{CapShared, "shared"},
	{CapSnapshot, "snapshot"},
	{CapMemory, "memory"},
}

// Has reports whether every operation of op is in c.
func (c Capabilities) Has(op Capabilities) bool { return c&op == op }

// String names the operations in c, comma-separated ("pause,usage"), or
// "none".
func (c Capabilities) String() string {
	var names []string
	for _, n := range capNames {
		if c.Has(n.c) {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// ErrNotSupported is what an operation a provider cannot perform answers
// (NotSupported); it is a failed precondition. Compare with errors.Is.
var ErrNotSupported = errors.New("not supported by the provider")

// NotSupported is the error of operation op on a provider that cannot
// perform it: "pause is not supported by provider e2b", category
// failed_precondition, errors.Is ErrNotSupported.
func NotSupported(provider string, op Capabilities) error {
	return notSupported{op: op.String(), provider: provider}
}

type notSupported struct{ op, provider string }

func (e notSupported) Error() string {
	return e.op + " is not supported by provider " + e.provider
}

func (e notSupported) Unwrap() []error {
	return []error{ErrNotSupported, errdefs.ErrFailedPrecondition}
}
