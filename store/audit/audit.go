// Package audit declares the event of the audit trail that every store
// keeps, and the Writer that carries the events sandboxes cause to it
// fairly across tenants, in batches. It is its own package so that the
// store implementations and the store package (which opens them) do not
// import each other; callers use the event as store.AuditEvent.
package audit

import "time"

// Well-known event kinds. Kind is free-form; these are the ones sandlot
// writes.
const (
	KindGuardFinding = "guard.finding"
	// KindContextTerminated: an execution context ended, by any path
	// (detail: context, sandbox, template, reason, error).
	KindContextTerminated = "context.terminated"
	KindTenantCreated     = "tenant.created"
	KindTenantDeleted     = "tenant.deleted"
	KindKeyRotated        = "tenant.key_rotated"
	// KindKeyCreated and KindKeyRevoked: a tenant made or revoked one of
	// its keys over /v1/keys (detail: key, the id; prefix and name on
	// creation).
	KindKeyCreated    = "tenant.key_created"
	KindKeyRevoked    = "tenant.key_revoked"
	KindNetConnection = "network.connection" // a sandbox's outbound connection (allowed or not)
	KindNetDNS        = "network.dns"        // a sandbox's DNS question
	// KindNetLimited: a sandbox's network events past its audit rate,
	// counted instead of recorded (detail sandbox, suppressed).
	KindNetLimited = "network.limited"
	// KindToolCall: a tool call ended (detail: tool, conversation, path,
	// user, forced, durationMs, code: the error's category, "" on
	// success); the web console's history of a context's calls.
	KindToolCall = "tool.call"
)

// Event is one audit record. ID and (when zero) At are assigned by the
// store on append; At is kept at millisecond precision in UTC.
type Event struct {
	ID        int64             `json:"id"`
	TenantID  string            `json:"tenantId,omitempty"`
	ContextID string            `json:"contextId,omitempty"`
	Kind      string            `json:"kind"`
	Detail    map[string]string `json:"detail,omitempty"`
	At        time.Time         `json:"at"`
}
