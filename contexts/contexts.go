// Package contexts owns execution contexts: the identity (tenant,
// conversation, path), the sandbox behind it and its lifecycle.
//
// The state machine, documented here and nowhere else:
//
//	creating ──► ready ──► terminated
//	    │
//	    └──────► error
//
// A context is active while it is creating or ready; at most one context is
// active per identity. Terminated and error rows stay in the store for audit,
// with a Reason. Nothing ever leaves terminated or error.
//
// The package declares the interfaces it consumes (Store, Provider, Sandbox,
// Guard); implementations live in store/..., provider/... and guard.
package contexts

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/network/policy"
)

// DefaultPath is the path id used when a request names none.
const DefaultPath = "main"

// Identity keys an execution context: the session key (tenant, user,
// conversation or task, path). UserID is optional: "" is no user, the key
// of every context made before users existed, and two end users behind
// one tenant key who name the same conversation get two contexts.
type Identity struct {
	TenantID       string `json:"tenantId"`
	UserID         string `json:"userId,omitempty"`
	ConversationID string `json:"conversationId"`
	PathID         string `json:"pathId"`
}

// State of a context.
type State string

const (
	StateCreating   State = "creating"
	StateReady      State = "ready"
	StateTerminated State = "terminated"
	StateError      State = "error"
)

// Active reports whether s counts against limits and uniqueness.
func (s State) Active() bool { return s == StateCreating || s == StateReady }

// Reason records why a context left the active states.
type Reason string

const (
	ReasonExpired  Reason = "expired"
	ReasonError    Reason = "error"
	ReasonManual   Reason = "manual"
	ReasonMerged   Reason = "merged"
	ReasonDeleted  Reason = "deleted"
	ReasonArchived Reason = "archived"
	ReasonRotated  Reason = "rotated"
)

// ResourceUsage is the last sampled usage of the sandbox. A provider
// fills what it can measure: provider/local every field but CPUPct (its
// cgroup gives CPU time), provider/e2b memory, cache, disk and CPUPct
// (E2B reports a share of the CPUs, not a time).
type ResourceUsage struct {
	MemoryBytes int64   `json:"memoryBytes,omitempty"`
	CacheBytes  int64   `json:"cacheBytes,omitempty"` // of MemoryBytes, page cache
	CPUTimeMs   int64   `json:"cpuTimeMs,omitempty"`
	CPUPct      float64 `json:"cpuPct,omitempty"` // share of the sandbox's CPUs used over the provider's last sampling interval, percent
	DiskBytes   int64   `json:"diskBytes,omitempty"`
	PIDs        int64   `json:"pids,omitempty"`
}

// Record is the stored form of a context.
type Record struct {
	ID string `json:"id"` // context id (UUID); stable for the record's life
	Identity
	State                State         `json:"status"`
	Reason               Reason        `json:"terminationReason,omitempty"`
	SandboxID            string        `json:"sandboxId,omitempty"`
	Provider             string        `json:"provider,omitempty"`
	Template             string        `json:"template,omitempty"`
	CreatedAt            time.Time     `json:"createdAt"`
	LastUsedAt           time.Time     `json:"lastUsedAt"`
	ExpiresAt            time.Time     `json:"expiresAt"`
	TerminatedAt         *time.Time    `json:"terminatedAt,omitempty"`
	ExecutionCount       int64         `json:"executionCount"`
	TotalExecutionTimeMs int64         `json:"totalExecutionTimeMs"`
	LastError            string        `json:"lastError,omitempty"` // sanitized
	ResourceUsage        ResourceUsage `json:"resourceUsage"`
	// Metadata is the caller's labels (E2B metadata), and nothing else:
	// no key starts with ReservedPrefix (CheckMetadata).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Node is the daemon that owns the context (Config.Node of the manager
	// that created or took it over); "" is no node (records written before
	// nodes existed). Only Create sets it and only Claim changes it.
	Node string `json:"node,omitempty"`
	// Env is the environment the create gave the sandbox
	// (CreateOptions.Env, E2B's envVars), kept so that a wake gives the
	// new sandbox the same. Its values may be credentials: it is never
	// marshalled, no edge shows it, and SQLite and Postgres keep it sealed
	// with the secrets key (docs/state.md, "What a wake carries").
	Env map[string]string `json:"-"`
	Lifecycle
}

// Lifecycle is the typed lifecycle state of a context: what CreateOptions
// asked for, and what pause, resume and UpdateNetwork changed since. Every
// store keeps each field in a column of its own.
type Lifecycle struct {
	// PausedAt is when the context was paused (Manager.Pause); nil while
	// it runs.
	PausedAt *time.Time `json:"pausedAt,omitempty"`
	// AutoPause, when positive, pauses the context at its expiry instead of
	// ending it, and keeps it paused for that long (E2B's autoPause).
	AutoPause time.Duration `json:"autoPause,omitempty"`
	// AutoPauseToDisk makes AutoPause's pause one without memory: the
	// context is suspended to disk at its expiry (Suspend, held as E2B's
	// pause is), kept for AutoPause (E2B's onTimeout {action: 'pause',
	// keepMemory: false}).
	AutoPauseToDisk bool `json:"autoPauseToDisk,omitempty"`
	// AutoResume, when positive, lets traffic to a paused context resume
	// it, with that TTL (E2B's autoResume, which the E2B edge applies).
	AutoResume time.Duration `json:"autoResume,omitempty"`
	// FixedExpiry makes the expiry absolute: calls do not extend it.
	FixedExpiry bool `json:"fixedExpiry,omitempty"`
	// MaxExecutions is the context's own rotation limit: 0 the config's,
	// negative never.
	MaxExecutions int64 `json:"maxExecutions,omitempty"`
	// Network is the policy of the sandbox's own network; nil: loopback
	// only.
	Network *policy.Policy `json:"network,omitempty"`
	// TemplateName is the template as the caller named it, when an edge
	// names templates its own way (E2B's templateID, which maps several
	// names onto one template); Template is what was started.
	TemplateName string `json:"templateName,omitempty"`
	// SuspendImage, when set, says the context is suspended to disk
	// (Manager.Suspend), and is the id of the tenant's template, source
	// "suspend", whose image is the context's template plus its writable
	// layer as it was. PausedAt is set too. SandboxID is empty, and the
	// next call wakes the context on a new sandbox of that image, its
	// kernels fresh; or, where the provider kept its memory (CapMemory),
	// SandboxID names the checkpointed sandbox, which the wake restores
	// (the image is then the fallback of a failed restore).
	SuspendImage string `json:"suspendImage,omitempty"`
	// SuspendHeld says a suspended context was suspended as E2B's pause
	// (Suspend with keep > 0: pause({keepMemory: false}), or its timeout's
	// onTimeout pause without memory): E2B's traffic (envd, the code
	// interpreter, its ports) wakes it only when it asked for autoResume,
	// as on E2B, until connect does. A suspend of sandlot's own (/v1's,
	// the idle suspend) is not held: the next call or port request wakes
	// the context.
	SuspendHeld bool `json:"suspendHeld,omitempty"`
}

// Clone returns a copy of r that shares nothing mutable with it. A
// record's network policy is never changed in place (UpdateNetwork puts a
// new one), so the copy has a policy of its own whose rule slices it
// shares.
func (r *Record) Clone() *Record {
	c := *r
	c.Metadata = maps.Clone(r.Metadata)
	c.Env = maps.Clone(r.Env)
	c.TerminatedAt = cloneTime(r.TerminatedAt)
	c.PausedAt = cloneTime(r.PausedAt)
	if r.Network != nil {
		p := *r.Network
		c.Network = &p
	}
	return &c
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := *t
	return &v
}

// Paused reports whether the context is paused (suspended included).
func (l *Lifecycle) Paused() bool { return l.PausedAt != nil }

// Suspended reports whether the context is suspended to disk: paused,
// its filesystem kept as an image (SuspendImage).
func (l *Lifecycle) Suspended() bool { return l.SuspendImage != "" }

// KeepsMemory reports whether the context is suspended with its memory:
// its sandbox checkpointed (SandboxID), to be restored by the wake.
func (r *Record) KeepsMemory() bool { return r.Suspended() && r.SandboxID != "" }

// ReservedPrefix starts the metadata keys that are sandlot's own. A caller
// may not set one (CheckMetadata); sandlot keeps its own state in typed
// fields (Lifecycle), never in metadata.
const ReservedPrefix = "sandlot."

// CheckMetadata refuses caller metadata that holds a key under
// ReservedPrefix, naming the key (the first in order, so the answer does
// not vary): invalid_argument.
func CheckMetadata(m map[string]string) error {
	var bad []string
	for k := range m {
		if strings.HasPrefix(k, ReservedPrefix) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("metadata key %q is reserved: keys starting with %q are sandlot's own: %w", slices.Min(bad), ReservedPrefix, errdefs.ErrInvalidArgument)
}

// Filter selects records for List. Zero fields match everything.
type Filter struct {
	TenantID string
	// UserID keeps one user's records when not empty. ByUser makes it an
	// exact match, so that an empty UserID keeps the records with no user
	// (without it, "" matches every user, as the other zero fields do).
	UserID         string
	ByUser         bool
	ConversationID string
	PathID         string
	States         []State
	Metadata       map[string]string // every pair must match
	Limit          int               // 0: 100
	After          string            // paging cursor: the last ID of the previous page
}

// Store persists records. Implementations: store/memory, store/sqlite,
// store/postgres; store/storetest is the conformance suite.
//
// Tenant scoping: when ctx carries a tenant (tenant.FromContext), a store
// that enforces row-level security (Postgres) restricts every statement to
// that tenant. System work (cleanup, reconcile) runs with no tenant in ctx.
type Store interface {
	// Create inserts rec (state creating). It fails with
	// errdefs.ErrAlreadyExists when an active context exists for rec.Identity.
	Create(ctx context.Context, rec *Record) error
	// Get loads a record by context id (errdefs.ErrNotFound when absent).
	Get(ctx context.Context, id string) (*Record, error)
	// GetActive loads the active record of an identity (ErrNotFound if none).
	GetActive(ctx context.Context, id Identity) (*Record, error)
	// Update saves the mutable fields of rec (state, sandbox, times,
	// counters, error, usage, metadata). It never moves a record out of a
	// final state (ErrFailedPrecondition). The execution counters and
	// lastUsedAt only grow: Update keeps the stored ones where they are
	// greater, so a record read before a concurrent RecordExecution or
	// Touch (a pause, a network change or a usage sample saved while the
	// tally is written behind the answers) does not take back its count.
	Update(ctx context.Context, rec *Record) error
	// RecordExecution atomically adds n executions that took dur in all,
	// sets lastUsedAt=now and expiresAt, and returns the new record.
	RecordExecution(ctx context.Context, id string, n int, dur time.Duration, now, expiresAt time.Time) (*Record, error)
	// Touch sets lastUsedAt and expiresAt.
	Touch(ctx context.Context, id string, now, expiresAt time.Time) error
	// Terminate moves an active record to terminated (or error when reason
	// is ReasonError) with reason and time. It reports false when the
	// record was not active (already ended by someone else): the caller
	// that gets true owns the teardown, so two managers never double-clean.
	Terminate(ctx context.Context, id string, reason Reason, at time.Time, lastErr string) (bool, error)
	// ListExpired returns active records with expiresAt <= cutoff.
	ListExpired(ctx context.Context, cutoff time.Time, limit int) ([]*Record, error)
	// ListActive returns every active record (all tenants, for reconcile).
	ListActive(ctx context.Context) ([]*Record, error)
	// CountActive counts active records of a tenant, and of one
	// conversation of one user of it (userID "" being no user) when
	// conversationID is not empty.
	CountActive(ctx context.Context, tenantID, userID, conversationID string) (int, error)
	// List returns records matching f ordered by ID, for paging.
	List(ctx context.Context, f Filter) ([]*Record, error)
	// Claim moves an active record from node from to node to, a
	// compare-and-set: it reports false when the record is no longer
	// active or another node already took it (ErrNotFound when absent).
	Claim(ctx context.Context, id, from, to string) (bool, error)
	// Heartbeat renews node's lease: it records at as the node's last
	// heartbeat. Nodes are system rows, never tenant-scoped; node must not
	// be empty (ErrInvalidArgument).
	Heartbeat(ctx context.Context, node string, at time.Time) error
	// LastHeartbeat returns node's last heartbeat (ErrNotFound when the
	// node never sent one).
	LastHeartbeat(ctx context.Context, node string) (time.Time, error)
	// AcquireLease takes the cluster-wide lease name for holder for ttl,
	// or renews it when holder has it already: a compare-and-set, so at
	// any moment at most one holder has a lease. It reports false when
	// another holder's lease is live. The store's clock judges the
	// expiry (Postgres: the database's), never the caller's, and the
	// lease never ends before ttl after the call was made: a holder that
	// reads its own clock before the call and stops by then plus ttl has
	// stopped before anyone else can take it. Leases are system rows,
	// never tenant-scoped; name and holder must not be empty, ttl must be
	// positive (ErrInvalidArgument).
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease gives lease name up if holder has it, so another
	// holder can take it at once; otherwise it does nothing.
	ReleaseLease(ctx context.Context, name, holder string) error
	// Close releases the store.
	Close() error
}

// OutputFunc receives streamed output of a running call. It must not block
// for long: the sandbox connection waits for it. It is an alias (not a
// defined type) so that *agent.Client, whose methods take a plain
// func(agent.OutputEvent), satisfies Sandbox: Go requires identical method
// signatures, and a defined func type is not identical to its literal.
type OutputFunc = func(agent.OutputEvent)

// Sandbox is a connected sandbox. Methods are safe for concurrent use; the
// Manager serializes RunCode per context. The agent.Client implements it.
type Sandbox interface {
	ID() string
	Ping(ctx context.Context) error
	RunCode(ctx context.Context, p agent.RunCodeParams, out OutputFunc) (*agent.RunCodeResult, error)
	RestartKernel(ctx context.Context, p agent.KernelParams) error
	Exec(ctx context.Context, p agent.ExecParams, out OutputFunc) (*agent.ExecResult, error)
	Signal(ctx context.Context, p agent.SignalParams) error
	Stdin(ctx context.Context, p agent.StdinParams) error
	Processes(ctx context.Context) ([]agent.Process, error)
	ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error)
	WriteFile(ctx context.Context, p agent.WriteParams) (*agent.FileInfo, error)
	EditFile(ctx context.Context, p agent.EditParams) (*agent.EditResult, error)
	List(ctx context.Context, p agent.ListParams) ([]agent.FileInfo, error)
	Stat(ctx context.Context, path string) (*agent.FileInfo, error)
	Mkdir(ctx context.Context, path string) (*agent.FileInfo, error)
	Remove(ctx context.Context, p agent.RemoveParams) error
	Move(ctx context.Context, p agent.MoveParams) (*agent.FileInfo, error)
	Glob(ctx context.Context, p agent.GlobParams) (*agent.GlobResult, error)
	Grep(ctx context.Context, p agent.GrepParams) (*agent.GrepResult, error)
	// Close drops the connection and leaves the sandbox running.
	Close() error
}

// Guard redacts what leaves a sandbox. The guard package implements it; a
// nil Guard in Config passes everything through (tests only).
type Guard interface {
	// Text redacts a complete string (results, errors, file contents).
	Text(ctx context.Context, tenantID, s string) string
	// Stream returns a redactor for one output stream of one call. Write
	// returns what may be emitted now (it holds back a tail so a secret
	// split across chunks is still caught); Flush returns the rest.
	Stream(ctx context.Context, tenantID string) StreamRedactor
	// File returns a redactor for the bytes of one file, written in order
	// from its start: text comes out as Stream would give it, a binary
	// format keeps its length (docs/guard.md). ReadFile is its one user.
	File(ctx context.Context, tenantID string) FileRedactor
	// Image returns an image result (format "png" or "jpeg") as it may
	// leave, or nil and a marker to show in its place when data is not
	// such an image.
	Image(ctx context.Context, tenantID, format string, data []byte) ([]byte, string)
}

// StreamRedactor is one stream's redaction state.
type StreamRedactor interface {
	Write(chunk string) string
	Flush() string
}

// IdleFlusher is a StreamRedactor that can release the text it holds back
// once its stream has gone quiet (IdleFlush), without ending the stream:
// an interactive prompt or an echoed partial line then arrives while the
// process still runs. FlushIdle may keep text it must not release yet (an
// open private key block); writes continue after it.
type IdleFlusher interface {
	FlushIdle() string
}

// IdleFlush is how long a guarded output stream must be quiet before its
// redactor's held-back text is released (IdleFlusher). Parts of a secret
// written further apart than this are judged apart: the part before the
// pause has left already (see docs/guard.md).
const IdleFlush = 200 * time.Millisecond

// FileRedactor is one file's redaction state. Write returns what may be
// emitted now; Flush returns the rest at the end of the file.
type FileRedactor interface {
	Write(p []byte) []byte
	Flush() []byte
}
