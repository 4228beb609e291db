package core

import (
	"context"
	"io"
	"time"

	"github.com/sandlot/sandlot/contexts"
)

// Manager is what the E2B surface needs from contexts.Manager. The
// *contexts.Manager satisfies it; tests wrap the real one to watch the
// calls.
type Manager interface {
	GetOrCreate(ctx context.Context, id contexts.Identity, opts CreateOptions) (*contexts.Record, error)
	Execute(ctx context.Context, id contexts.Identity, req ExecuteRequest, out contexts.OutputFunc) (*ExecuteResult, error)
	Use(ctx context.Context, id contexts.Identity, opts CreateOptions, fn func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error) error
	Get(ctx context.Context, tenantID, contextID string) (*contexts.Record, error)
	// Served is Get from the manager's own copy of a context it alone
	// serves (a call on its sandbox reads it so, without a store read).
	Served(ctx context.Context, tenantID, contextID string) (*contexts.Record, error)
	List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error)
	Terminate(ctx context.Context, tenantID, contextID string, reason contexts.Reason) error
	SetTTL(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*contexts.Record, error)
	// Pause freezes a context's sandbox for at most keep; Resume thaws it
	// with a TTL of ttl from now (contexts.ErrPaused, ErrNotPaused).
	Pause(ctx context.Context, tenantID, contextID string, keep time.Duration) (*contexts.Record, error)
	Resume(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*contexts.Record, error)
	// PauseMemory pauses a context for at most keep with its memory:
	// checkpointed to disk where the provider can (runsc), frozen
	// otherwise (E2B's pause()).
	PauseMemory(ctx context.Context, tenantID, contextID string, keep time.Duration) (*contexts.Record, error)
	// SuspendFiles suspends a context to disk (pause without memory): its
	// files kept, its sandbox and memory gone; Resume boots it again.
	SuspendFiles(ctx context.Context, tenantID, contextID string, keep time.Duration) (*contexts.Record, error)
	// Wake wakes a context suspended to disk as its next call would; one
	// that is not suspended is returned as it is.
	Wake(ctx context.Context, tenantID, contextID string) (*contexts.Record, error)
	// AutoPause pauses a context past its expiry that asked to pause then
	// (Record.AutoPause) and returns its record.
	AutoPause(ctx context.Context, tenantID, contextID string) (*contexts.Record, error)
	// Usage samples a context's resource usage now (getMetrics).
	Usage(ctx context.Context, tenantID, contextID string) (contexts.ResourceUsage, error)
	// Capture writes a context's filesystem as a layer (a snapshot).
	Capture(ctx context.Context, tenantID, contextID string, w io.Writer, max int64) (*contexts.Record, error)
	// ForkSnapshot captures a context as a snapshot template for forks
	// (contexts.Manager.ForkSnapshot) and returns the source's record.
	ForkSnapshot(ctx context.Context, tenantID, contextID string) (*contexts.Record, contexts.SnapshotInfo, error)
	// Reboot drops a paused context's memory and boots it again from its
	// files, as one operation under its lock (contexts.Manager.Reboot).
	Reboot(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*contexts.Record, error)
	// Now is the manager's clock: a sandbox's end is judged by it.
	Now() time.Time
	// OnTerminated tells fn of every context the manager ends, whatever
	// ends it: the edge's state of that sandbox goes then.
	OnTerminated(fn func(ctx context.Context, ev contexts.Termination)) (remove func())
}

var _ Manager = (*contexts.Manager)(nil)

// The Manager API types, named here so the Manager interface reads alone.
type (
	CreateOptions  = contexts.CreateOptions
	ExecuteRequest = contexts.ExecuteRequest
	ExecuteResult  = contexts.ExecuteResult
)
