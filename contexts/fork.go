package contexts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// A fork starts a context from another's filesystem: the source's
// writable layer is captured (Capture: the source frozen meanwhile, then
// running on) as a snapshot template of the tenant's, named fork-…, and
// the new context starts from it. The manager owns the sequence, so every
// edge forks alike: /v1's fork onto a path and the fork_sandbox tool
// (Fork), E2B's Sandbox.fork into new conversations (ForkSnapshot, then
// one create per fork). Memory is carried where the provider keeps it
// (forkmem.go, ForkResult.Memory); elsewhere the forks' kernels start
// fresh. docs/state-snapshots.md, "Fork".

// Snapshots stores the template a fork starts from. templates.Catalog
// implements it; the manager finds it on Config.Catalog.
type Snapshots interface {
	// TakeSnapshot stores the layer capture writes, over the image of
	// template, as a snapshot template of tenantID's named name (listed
	// with its snapshots and counted in their bound), and returns it.
	TakeSnapshot(ctx context.Context, tenantID, contextID, template, name string, capture func(ctx context.Context, w io.Writer, max int64) error) (SnapshotInfo, error)
	// DeleteSnapshot deletes tenantID's template id.
	DeleteSnapshot(ctx context.Context, tenantID, id string) error
}

// SnapshotInfo describes a snapshot template.
type SnapshotInfo struct {
	// ID and Name are the template's.
	ID, Name string
	// ContextID is the context it was taken from, Template the id of the
	// template that context ran.
	ContextID, Template string
	// Bytes is the captured layer's size.
	Bytes     int64
	CreatedAt time.Time
	// MemoryCheckpoint, on a fork's template (ForkSnapshot), is the fork checkpoint
	// of the source's memory the forks start from (CreateOptions.MemoryCheckpoint),
	// deleted when the caller's request is done; "" where the provider
	// keeps no memory: the forks carry files.
	MemoryCheckpoint string
}

// ForkResult is a fork onto a path.
type ForkResult struct {
	// Context is the new context, on the path asked for.
	Context *Record
	// Snapshot is the template it started from: it stays while a context
	// runs on it and is deleted when the last one ends (forkdrop.go).
	Snapshot SnapshotInfo
	// Memory reports whether the source's memory (kernels, variables,
	// processes) was carried: on runsc (forkmem.go); elsewhere the fork's
	// kernels start fresh with the source's files.
	Memory bool
}

func (m *Manager) snapshots() (Snapshots, error) {
	if !m.provider.Capabilities().Has(CapSnapshot) {
		return nil, NotSupported(m.provider.Name(), CapSnapshot)
	}
	sn, ok := m.cfg.Catalog.(Snapshots)
	if !ok || m.cfg.Catalog == nil {
		return nil, fmt.Errorf("this daemon keeps no snapshots (no image store): %w", errdefs.ErrFailedPrecondition)
	}
	return sn, nil
}

// ForkSnapshot captures tenantID's active context contextID as a snapshot
// template named fork-… for forks to start from, and returns the source's
// record as it was and the template. The source is frozen during the
// capture and runs on; a suspended one is ErrSuspended. The template stays
// at least until ctx is done (the caller starts the forks under it), then
// goes when no context runs on it (forkdrop.go).
func (m *Manager) ForkSnapshot(ctx context.Context, tenantID, contextID string) (*Record, SnapshotInfo, error) {
	sn, err := m.snapshots()
	if err != nil {
		return nil, SnapshotInfo{}, fmt.Errorf("fork of context %s: %w", contextID, err)
	}
	src, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return nil, SnapshotInfo{}, err
	}
	if !src.State.Active() {
		return nil, SnapshotInfo{}, fmt.Errorf("context %s has ended: %w", contextID, errdefs.ErrNotFound)
	}
	src, info, err := m.forkSnapshot(ctx, sn, src)
	if err != nil {
		return nil, SnapshotInfo{}, err
	}
	// The caller starts the forks under ctx: the template stays pinned
	// and the memory checkpoint kept until it is done; then the template
	// goes with the last context on it, the checkpoint at once.
	context.AfterFunc(ctx, func() {
		m.dropForkCheckpoint(ctx, info.MemoryCheckpoint)
		m.unpinFork(context.WithoutCancel(ctx), src.TenantID, info.ID)
	})
	return src, info, nil
}

func (m *Manager) forkSnapshot(ctx context.Context, sn Snapshots, src *Record) (*Record, SnapshotInfo, error) {
	name := "fork-" + strings.ToLower(rand.Text()[:12])
	var ck string
	info, err := m.takeForkSnapshot(ctx, sn, src.TenantID, src.ID, src.Template, name, func(ctx context.Context, w io.Writer, max int64) error {
		m.dropForkCheckpoint(ctx, ck) // a capture tried again
		var err error
		_, ck, err = m.captureForFork(ctx, src.TenantID, src.ID, w, max, true)
		return err
	}) // pinned: the caller unpins (forkdrop.go)
	if err != nil {
		m.dropForkCheckpoint(ctx, ck)
		return nil, SnapshotInfo{}, err
	}
	info.MemoryCheckpoint = ck
	return src, info, nil
}

// Fork forks tenantID's active context contextID onto path pathID of its
// own conversation: a new context of the source's user, with its network
// policy, starts from a snapshot of its files (ForkSnapshot). The source's
// own path is invalid_argument; a path that already has a context is
// already_exists (end it first), and the snapshot is deleted again when
// the new context does not start. The target is always in the source's
// tenant, user and conversation: a caller names a path, never another
// conversation's.
func (m *Manager) Fork(ctx context.Context, tenantID, contextID, pathID string) (*ForkResult, error) {
	if pathID == "" {
		return nil, fmt.Errorf("pathId is required: the path the fork goes onto: %w", errdefs.ErrInvalidArgument)
	}
	if err := CheckIDPart("pathId", pathID); err != nil {
		return nil, err
	}
	sn, err := m.snapshots()
	if err != nil {
		return nil, fmt.Errorf("fork of context %s: %w", contextID, err)
	}
	src, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	if !src.State.Active() {
		return nil, fmt.Errorf("context %s has ended: %w", contextID, errdefs.ErrNotFound)
	}
	to := Identity{TenantID: src.TenantID, UserID: src.UserID, ConversationID: src.ConversationID, PathID: pathID}
	if to == src.Identity {
		return nil, fmt.Errorf("the fork's path is the source's own (%s): %w", pathID, errdefs.ErrInvalidArgument)
	}
	taken := func(rec *Record) error {
		return errdefs.Sentence(errdefs.ErrAlreadyExists, "path %s of conversation %s already has a context (%s); end it first", pathID, to.ConversationID, rec.ID)
	}
	// A path that has a context is refused before anything is captured.
	if rec, err := m.Lookup(ctx, to); err == nil {
		return nil, taken(rec)
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return nil, err
	}
	src, info, err := m.forkSnapshot(ctx, sn, src)
	if err != nil {
		return nil, err
	}
	defer m.dropForkCheckpoint(ctx, info.MemoryCheckpoint)
	kept := false
	rec, err := m.GetOrCreate(context.WithValue(ctx, forkKeptKey{}, &kept), to, CreateOptions{Template: info.ID, Network: src.Network, MemoryCheckpoint: info.MemoryCheckpoint})
	if err == nil && rec.Template != info.ID {
		// A context reached the path meanwhile; it runs its own template.
		err = taken(rec)
	}
	if err != nil {
		m.forgetFork(ctx, info.ID)
		if derr := sn.DeleteSnapshot(context.WithoutCancel(ctx), tenantID, info.ID); derr != nil {
			m.log.Warn("fork: its template stays", logkey.Template, info.ID, logkey.Err, derr)
		}
		return nil, fmt.Errorf("fork onto path %s: %w", pathID, err)
	}
	m.unpinFork(ctx, src.TenantID, info.ID)
	return &ForkResult{Context: rec, Snapshot: info, Memory: kept}, nil
}
