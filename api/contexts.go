package api

import (
	_ "embed"
	"time"
)

// Context is an execution context: the body of GET /v1/contexts/{id} and
// an entry of GET /v1/contexts.
type Context struct {
	ID             string `json:"id"`
	TenantID       string `json:"tenantId"`
	UserID         string `json:"userId,omitempty"`
	ConversationID string `json:"conversationId"`
	PathID         string `json:"pathId"`
	// Status is creating, ready, terminated or error; terminated and
	// error are final, with TerminationReason (expired, error, manual,
	// merged, deleted, archived, rotated).
	Status               string            `json:"status"`
	TerminationReason    string            `json:"terminationReason,omitempty"`
	SandboxID            string            `json:"sandboxId,omitempty"`
	Provider             string            `json:"provider,omitempty"`
	Template             string            `json:"template,omitempty"`
	CreatedAt            time.Time         `json:"createdAt"`
	LastUsedAt           time.Time         `json:"lastUsedAt"`
	ExpiresAt            time.Time         `json:"expiresAt"`
	TerminatedAt         *time.Time        `json:"terminatedAt,omitempty"`
	ExecutionCount       int64             `json:"executionCount"`
	TotalExecutionTimeMs int64             `json:"totalExecutionTimeMs"`
	LastError            string            `json:"lastError,omitempty"`
	ResourceUsage        ResourceUsage     `json:"resourceUsage"`
	Metadata             map[string]string `json:"metadata,omitempty"`
	// Node is the daemon that serves the context, when several share a
	// store.
	Node string `json:"node,omitempty"`
	// Suspended: the context is suspended to disk (POST
	// /v1/contexts/{id}/suspend): no sandbox runs for it, its files are
	// kept, and its next call wakes it: with its kernels fresh, or as they
	// were when Memory.
	Suspended bool `json:"suspended,omitempty"`
	// Memory: the suspended context kept its memory (runsc's checkpoint):
	// its next call restores its kernels, variables and processes. The
	// suspend's answer says by it whether the memory was kept.
	Memory bool `json:"memory,omitempty"`
	// Network is the policy of the context's own network; absent: none
	// (loopback only).
	Network *ContextNetwork `json:"network,omitempty"`
}

// ContextNetwork is a context's network policy as /v1 shows it: the
// request's Network, with its rules in their text form ("example.org:443"),
// and of its header rules the host and the header names only: a value may
// be a credential, and no route returns one.
type ContextNetwork struct {
	Mode    string                `json:"mode"`
	Allow   []string              `json:"allow,omitempty"`
	Deny    []string              `json:"deny,omitempty"`
	Headers []ContextNetworkHeads `json:"headers,omitempty"`
	Ingress NetworkIngress        `json:"ingress,omitzero"`
	Secrets []string              `json:"secrets,omitempty"`
}

// ContextNetworkHeads names the headers a context's proxy sets on HTTPS
// requests to Host, without their values.
type ContextNetworkHeads struct {
	Host  string   `json:"host"`
	Names []string `json:"names"`
}

// ContextSnapshot is the first event of GET /v1/contexts/events (and
// the one after a watcher fell behind): every active context the key
// sees, and the server's time, against which a page counts TTLs.
type ContextSnapshot struct {
	Contexts   []Context `json:"contexts"`
	ServerTime time.Time `json:"serverTime"`
}

// ContextEvent is an event of GET /v1/contexts/events after the snapshot:
// one context whose record changed (terminated and error are its last).
type ContextEvent struct {
	Context    Context   `json:"context"`
	ServerTime time.Time `json:"serverTime"`
}

// TTLRequest is the body of PUT /v1/contexts/{id}/ttl: the context's TTL
// from now, in seconds (1 to 86400).
type TTLRequest struct {
	TTLSeconds int `json:"ttlSeconds"`
}

// Active reports whether the context is creating or ready.
func (c *Context) Active() bool { return c.Status == "creating" || c.Status == "ready" }

// ResourceUsage is the last sampled usage of a context's sandbox.
type ResourceUsage struct {
	MemoryBytes int64   `json:"memoryBytes,omitempty"`
	CacheBytes  int64   `json:"cacheBytes,omitempty"` // of MemoryBytes, page cache
	CPUTimeMs   int64   `json:"cpuTimeMs,omitempty"`
	CPUPct      float64 `json:"cpuPct,omitempty"` // share of the CPUs used over the provider's last sampling interval (e2b)
	DiskBytes   int64   `json:"diskBytes,omitempty"`
	PIDs        int64   `json:"pids,omitempty"`
}

// ContextList is the body of GET /v1/contexts.
type ContextList struct {
	Contexts []Context `json:"contexts"`
	// Next is the cursor for the next page (pass as ?after=), empty at the end.
	Next string `json:"next,omitempty"`
}
