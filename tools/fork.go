package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Forker is what fork_sandbox needs of the manager (contexts.Manager
// implements it). Over Contexts that is not one, the tool answers
// failed_precondition.
type Forker interface {
	Lookup(ctx context.Context, id contexts.Identity) (*contexts.Record, error)
	Fork(ctx context.Context, tenantID, contextID, pathID string) (*contexts.ForkResult, error)
}

var _ Forker = (*contexts.Manager)(nil)

// ForkSandboxResult is the result of fork_sandbox. Its PathRef is the
// caller's (the source's) path; ForkPathID names the fork's.
type ForkSandboxResult struct {
	api.PathRef
	Success bool `json:"success"`
	// SourceContextID is the caller's context, which runs on unchanged.
	SourceContextID string `json:"sourceContextId"`
	// ContextID and ForkPathID are the fork's context and its path of the
	// same conversation.
	ContextID  string `json:"contextId"`
	ForkPathID string `json:"forkPathId"`
	// SnapshotID is the template the fork started from.
	SnapshotID string `json:"snapshotId"`
	// Memory reports whether the fork kept the source's memory
	// (variables, imports, processes); false: only its files.
	Memory bool `json:"memory"`
	// Notice says what the fork kept.
	Notice string `json:"notice"`
}

// forkSandbox forks the call's context onto another path of its
// conversation (contexts.Manager.Fork, docs/state-snapshots.md "Fork onto a path").
// The caller names a path only: the fork is always in its own tenant,
// user and conversation. A path without a context is not_found.
func (r *Registry) forkSandbox(ctx context.Context, call Call, args map[string]any, _ contexts.OutputFunc) (any, error) {
	f, ok := r.c.(Forker)
	if !ok {
		return nil, errdefs.Sentence(errdefs.ErrFailedPrecondition, "this daemon cannot fork sandboxes")
	}
	to := str(args, "to_path")
	rec, err := f.Lookup(ctx, call.Identity)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.Sentence(errdefs.ErrNotFound, "this conversation path has no sandbox to fork")
		}
		return nil, err
	}
	res, err := f.Fork(ctx, rec.TenantID, rec.ID, to)
	if err != nil {
		return nil, fmt.Errorf("fork_sandbox: %w", err)
	}
	notice := fmt.Sprintf("Forked onto path %s of this conversation: it has this sandbox's files as they were; ", to)
	if res.Memory {
		notice += "its variables, imports and processes were kept too."
	} else {
		notice += "its memory was not kept (variables, imports and running processes start fresh there)."
	}
	return &ForkSandboxResult{Success: true, SourceContextID: rec.ID, ContextID: res.Context.ID, ForkPathID: res.Context.PathID,
		SnapshotID: res.Snapshot.ID, Memory: res.Memory, Notice: notice}, nil
}
