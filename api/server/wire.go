package server

import (
	"maps"
	"slices"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store/audit"
)

// The /v1 wire types are api's own; these convert the daemon's types at
// the edge. Types of the same shape convert directly, so a field added on
// one side and not the other fails to compile; TestWireForms checks that
// each pair's JSON stays the same.

// contextOf is the wire form of a record.
func contextOf(r *contexts.Record) api.Context {
	return api.Context{
		ID:                   r.ID,
		TenantID:             r.TenantID,
		UserID:               r.UserID,
		ConversationID:       r.ConversationID,
		PathID:               r.PathID,
		Status:               string(r.State),
		TerminationReason:    string(r.Reason),
		SandboxID:            r.SandboxID,
		Provider:             r.Provider,
		Template:             r.Template,
		CreatedAt:            r.CreatedAt,
		LastUsedAt:           r.LastUsedAt,
		ExpiresAt:            r.ExpiresAt,
		TerminatedAt:         r.TerminatedAt,
		ExecutionCount:       r.ExecutionCount,
		TotalExecutionTimeMs: r.TotalExecutionTimeMs,
		LastError:            r.LastError,
		ResourceUsage:        api.ResourceUsage(r.ResourceUsage),
		Metadata:             r.Metadata,
		Node:                 r.Node,
		Suspended:            r.Suspended(),
		Memory:               r.KeepsMemory(),
		Network:              networkOf(r.Network),
	}
}

// networkOf is the wire form of a context's policy: header rules by host
// and header names, never a value (a value may be a credential).
func networkOf(p *policy.Policy) *api.ContextNetwork {
	if p == nil {
		return nil
	}
	rules := func(rs []policy.Rule) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.String())
		}
		return out
	}
	out := &api.ContextNetwork{Mode: string(p.Mode.Normalize()), Allow: rules(p.Allow), Deny: rules(p.Deny),
		Ingress: api.NetworkIngress(p.Ingress), Secrets: slices.Clone(p.Secrets)}
	for _, h := range p.Headers {
		names := slices.Sorted(maps.Keys(h.Headers))
		out.Headers = append(out.Headers, api.ContextNetworkHeads{Host: h.Host, Names: names})
	}
	return out
}

// fileInfosOf is the wire form of a listing; never nil.
func fileInfosOf(fs []agent.FileInfo) []api.FileInfo {
	out := make([]api.FileInfo, len(fs))
	for i, f := range fs {
		out[i] = api.FileInfo(f)
	}
	return out
}

// auditEventsOf is the wire form of audit events; never nil.
func auditEventsOf(evs []audit.Event) []api.AuditEvent {
	out := make([]api.AuditEvent, 0, len(evs))
	for _, ev := range evs {
		out = append(out, api.AuditEvent(ev))
	}
	return out
}
