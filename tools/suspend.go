package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Suspender is what suspend_sandbox needs of the manager
// (contexts.Manager implements it). Over Contexts that is not one, the
// tool answers failed_precondition.
type Suspender interface {
	Lookup(ctx context.Context, id contexts.Identity) (*contexts.Record, error)
	Suspend(ctx context.Context, tenantID, contextID string, keep time.Duration) (*contexts.Record, error)
}

var _ Suspender = (*contexts.Manager)(nil)

// SuspendSandboxResult is the result of suspend_sandbox.
type SuspendSandboxResult struct {
	api.PathRef
	Success bool `json:"success"`
	// ContextID is the suspended context's; it keeps its id, counters and
	// TTL, and the next call on the path wakes it.
	ContextID string `json:"contextId"`
	// Memory reports whether the sandbox's memory was kept (runsc's
	// checkpoint): the next call then restores its kernels, variables
	// and processes; false: its files only.
	Memory bool `json:"memory"`
	// Notice says what the suspend kept and what it dropped.
	Notice string `json:"notice"`
}

const (
	suspendNotice = "The sandbox is suspended to disk: its files are kept, its memory is freed. The next call on this " +
		"conversation path wakes it with its files; variables, imports and running processes start fresh."
	suspendMemoryNotice = "The sandbox is suspended to disk with its memory: its files, variables, imports and processes are " +
		"kept, and the next call on this conversation path restores them as they were."
)

// suspendResult is the tool's answer for rec, suspended (already, when
// was).
func suspendResult(rec *contexts.Record, already bool) *SuspendSandboxResult {
	notice := suspendNotice
	if rec.KeepsMemory() {
		notice = suspendMemoryNotice
	}
	if already {
		notice = "The sandbox was already suspended. " + notice
	}
	return &SuspendSandboxResult{Success: true, ContextID: rec.ID, Memory: rec.KeepsMemory(), Notice: notice}
}

// suspendSandbox suspends the call's context to disk
// (contexts.Manager.Suspend, docs/state.md "Suspend to disk"), keeping its
// expiry: it still ends on its TTL. A path without a context is
// not_found; one already suspended is a success that says so.
func (r *Registry) suspendSandbox(ctx context.Context, call Call, _ map[string]any, _ contexts.OutputFunc) (any, error) {
	s, ok := r.c.(Suspender)
	if !ok {
		return nil, errdefs.Sentence(errdefs.ErrFailedPrecondition, "this daemon cannot suspend sandboxes")
	}
	rec, err := s.Lookup(ctx, call.Identity)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.Sentence(errdefs.ErrNotFound, "this conversation path has no sandbox to suspend")
		}
		return nil, err
	}
	if rec.Suspended() {
		return suspendResult(rec, true), nil
	}
	out, err := s.Suspend(ctx, rec.TenantID, rec.ID, 0)
	if errors.Is(err, contexts.ErrSuspended) {
		if cur, lerr := s.Lookup(ctx, call.Identity); lerr == nil && cur.ID == rec.ID {
			rec = cur // suspended meanwhile: say how
		}
		return suspendResult(rec, true), nil
	}
	if err != nil {
		return nil, fmt.Errorf("suspend_sandbox: %w", err)
	}
	return suspendResult(out, false), nil
}
