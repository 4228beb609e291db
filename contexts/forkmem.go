package contexts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Fork with memory. Where the provider keeps memory (CapMemory: local on
// runsc), a fork's capture is followed, under the same identity lock, by
// a fork checkpoint of the source (Checkpointer.ForkCheckpoint): its
// memory saved, the source running on, reconnected (its sessions sealed
// from then on). Each fork is then created from the snapshot template
// with CreateOptions.MemoryCheckpoint: its sandbox restores the checkpoint over the
// source's files, so its kernels, variables and processes are the
// source's as they were. A restore that fails (a spec that differs, a file
// gVisor cannot find) starts the fork fresh instead, files only; the
// result says which (ForkResult.Memory). The checkpoint is deleted once
// the forks are made. docs/state.md, "Fork with memory".

// captureForFork captures tenantID's context contextID into w, as
// Capture, and with memory set and the provider able, then saves its
// memory for forks: the checkpoint's name, "" when none was made (the
// forks carry files). The source's connection is replaced by the one the
// checkpoint hands back.
func (m *Manager) captureForFork(ctx context.Context, tenantID, contextID string, w io.Writer, max int64, memory bool) (*Record, string, error) {
	if !m.provider.Capabilities().Has(CapSnapshot) {
		return nil, "", fmt.Errorf("snapshot of context %s: %w", contextID, NotSupported(m.provider.Name(), CapSnapshot))
	}
	rec, unlock, err := m.lockForPause(ctx, tenantID, contextID)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	if rec.Suspended() {
		return nil, "", fmt.Errorf("snapshot of context %s: wake it first: %w", contextID, ErrSuspended)
	}
	if err := m.provider.Capture(ctx, rec.SandboxID, w, max); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			if m.terminateRecord(ctx, rec, ReasonError, "sandbox lost") {
				m.markLost(rec.Identity)
			}
			return nil, "", fmt.Errorf("context %s: its sandbox is gone: %w", contextID, errdefs.ErrNotFound)
		}
		return nil, "", fmt.Errorf("snapshot of context %s: %w", contextID, err)
	}
	// A paused source could not release its channel; one with a network
	// or volumes has a sandbox no fork's matches (the restore would be
	// refused after the source's sessions were sealed for nothing).
	if !memory || rec.Paused() || rec.Network != nil || !m.provider.Capabilities().Has(CapMemory) {
		return rec, "", nil
	}
	m.mu.Lock()
	e := m.byID[rec.ID]
	m.mu.Unlock()
	done := m.beginCheckpoint(e)
	defer done()
	ck, sb, err := m.provider.ForkCheckpoint(ctx, rec.SandboxID)
	if err != nil {
		// The source's agent may have let go of its channel: the
		// connection the provider hands back replaces the closed one, and
		// without one the next call attaches again. Either way the source
		// is kept.
		m.log.Warn("fork without memory: fork checkpoint failed", logkey.Context, rec.ID, logkey.Sandbox, rec.SandboxID, logkey.Err, err)
		m.swapConn(e, sb)
		return rec, "", nil
	}
	m.swapConn(e, sb)
	return rec, ck, nil
}

// createSandbox is the provider's Create; one from a fork checkpoint
// (spec.MemoryCheckpoint) that fails is made again without it, files only.
func (m *Manager) createSandbox(ctx context.Context, rec *Record, spec Spec) (Sandbox, error) {
	if spec.MemoryCheckpoint == "" {
		return m.provider.Create(ctx, spec)
	}
	sb, err := m.provider.Create(ctx, spec)
	if err == nil {
		// The restored agent's environment names the source's identity
		// (IdentityEnv): the fork's replaces it for what runs from now on.
		if err := m.tellIdentity(ctx, sb, rec.Identity); err != nil {
			m.log.Warn("fork with memory: tell its identity", logkey.Context, rec.ID, logkey.Err, err)
		}
		if kept, ok := ctx.Value(forkKeptKey{}).(*bool); ok {
			*kept = true
		}
		return sb, nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	m.log.Warn("fork without memory: its restore failed; starting it from the files", logkey.Context, rec.ID, logkey.Err, err)
	spec.MemoryCheckpoint = ""
	return m.provider.Create(ctx, spec)
}

// forkKeptKey is the context key under which a fork's caller learns
// whether its sandbox was restored with the source's memory.
type forkKeptKey struct{}

// swapConn makes sb e's connection, nil meaning "attach again", and
// closes the one it replaces (and sb when e has ended).
func (m *Manager) swapConn(e *entry, sb Sandbox) {
	m.mu.Lock()
	var old Sandbox
	if e != nil && !e.ended {
		old, e.sb = e.sb, sb
		if sb != nil {
			e.alive = time.Now()
		} else {
			e.alive = time.Time{}
		}
		sb = nil
	}
	m.mu.Unlock()
	for _, c := range []Sandbox{old, sb} {
		if c != nil {
			c.Close()
		}
	}
}

// dropForkCheckpoint deletes fork checkpoint ck, if any.
func (m *Manager) dropForkCheckpoint(ctx context.Context, ck string) {
	if ck == "" {
		return
	}
	if err := m.provider.DropForkCheckpoint(context.WithoutCancel(ctx), ck); err != nil {
		m.log.Warn("fork: its checkpoint stays", logkey.Err, err)
	}
}
