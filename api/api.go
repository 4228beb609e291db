// Package api holds the wire types of sandlot's HTTP API (/v1), its error
// body, and the committed OpenAPI 3.1 document that describes them.
//
// The server (api/server) and the public Go client (client) both speak these
// types, so a field renamed here is renamed on both sides at once.
package api

import (
	_ "embed"
	"encoding/json"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/audit"
)

// DefaultAddr is where `sandlot serve` listens unless told otherwise:
// loopback only, so a fresh install exposes nothing to the network.
const DefaultAddr = "127.0.0.1:7423"

// Header names.
const (
	HeaderAPIKey    = "X-API-KEY"
	HeaderRequestID = "X-Request-Id"
	// HeaderGuardMode overrides the egress guard's mode (off, report,
	// enforce) for one request. Only admin tenants may send it; anyone
	// else gets 403.
	HeaderGuardMode = "X-Sandlot-Guard-Mode"
)

// Media types.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeNDJSON = "application/x-ndjson"
)

// OpenAPI is the OpenAPI 3.1 document of the API, served at
// GET /v1/openapi.json. A test in api/server checks it against the routes.
//
//go:embed openapi.json
var OpenAPI []byte

// Error is the body of every non-2xx response.
type Error struct {
	Code    errdefs.Code `json:"code"`
	Message string       `json:"message"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap maps the wire code back to its errdefs category, so errors.Is
// works on the client side.
func (e *Error) Unwrap() error { return errdefs.FromCode(e.Code) }

// ToolRequest is the body of POST /v1/tools/{name}. Identity resolution:
// pathId defaults to "main", taskId stands in for a missing conversationId,
// and with neither a new conversationId is generated and returned.
type ToolRequest struct {
	ConversationID string          `json:"conversationId,omitempty"`
	PathID         string          `json:"pathId,omitempty"`
	TaskID         string          `json:"taskId,omitempty"`
	Args           json.RawMessage `json:"args,omitempty"`
}

// RunCodeArgs are the args of the run_code tool. Timeout is in
// milliseconds (1000 to 600000; 0 means the server default).
type RunCodeArgs struct {
	Language    string `json:"language"`
	Code        string `json:"code"`
	Description string `json:"description,omitempty"`
	Timeout     int64  `json:"timeout,omitempty"`
}

// CodeResult is the result of the run_code tool as the tools package
// returns it (tools.RunCodeResult) and MCP sends it. It lives here, not in
// tools, so that the client SDK can decode it without importing the tools
// and their dependencies.
type CodeResult struct {
	Success         bool               `json:"success"`
	Stdout          string             `json:"stdout"`
	Stderr          string             `json:"stderr"`
	ExitCode        int                `json:"exitCode"`
	ExecutionTimeMs int64              `json:"executionTimeMs"`
	SandboxID       string             `json:"sandboxId"`
	ContextID       string             `json:"contextId,omitempty"`
	Results         []agent.RichResult `json:"results"`
	Error           *agent.ExecError   `json:"error"`
	TimedOut        bool               `json:"timedOut,omitempty"`
	KernelRestarted bool               `json:"kernelRestarted,omitempty"`
	// Truncated is set when any field was cut to the tools' MaxOutput
	// characters (or by the agent's own output bound).
	Truncated bool `json:"truncated"`
	// OutputType classifies stdout (or the main result's text when stdout
	// is empty): json, table or text. A result carrying an HTML table
	// (a pandas DataFrame) is a table.
	OutputType string `json:"outputType"`
}

// RunCodeResult is the result of the run_code tool over HTTP: the tool's
// result plus the identity the server resolved.
type RunCodeResult struct {
	CodeResult
	ConversationID string `json:"conversationId"`
	PathID         string `json:"pathId"`
}

// Event types of a streamed tool call (Accept: application/x-ndjson).
const (
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventResult = "result" // a rich result (figure, last expression)
	EventFinal  = "final"  // the tool's result; always the last event on success
	EventError  = "error"  // the call failed after streaming began; last event
)

// Event is one line of a streamed tool call.
type Event struct {
	Type string `json:"type"`
	Data string `json:"data,omitempty"` // stdout, stderr
	// Result is an agent.RichResult for type result, the tool's result
	// for type final.
	Result  json.RawMessage `json:"result,omitempty"`
	Code    errdefs.Code    `json:"code,omitempty"` // type error
	Message string          `json:"message,omitempty"`
}

// ContextList is the body of GET /v1/contexts.
type ContextList struct {
	Contexts []*contexts.Record `json:"contexts"`
	// Next is the cursor for the next page (pass as ?after=), empty at the end.
	Next string `json:"next,omitempty"`
}

// Path event types.
const (
	PathBranched = "branched"
	PathEdited   = "edited"
	PathMerged   = "merged"
	PathDeleted  = "deleted"
	PathArchived = "archived"
)

// PathEvent is the body of POST /v1/conversations/{c}/paths/{p}/events.
// For branched, sourcePathId names the path the new one branches from; for
// merged, targetPathId names the path this one merges into.
type PathEvent struct {
	Type         string `json:"type"`
	SourcePathID string `json:"sourcePathId,omitempty"`
	TargetPathID string `json:"targetPathId,omitempty"`
}

// FileList is the body of GET .../files/list.
type FileList struct {
	Path    string           `json:"path"`
	Entries []agent.FileInfo `json:"entries"`
}

// SessionStats is one row of GET /v1/metrics/sessions.
type SessionStats struct {
	ActiveSessions      int64 `json:"active_sessions"`
	TotalCreated        int64 `json:"total_created"`
	TotalReused         int64 `json:"total_reused"`
	TotalCleaned        int64 `json:"total_cleaned"`
	HealthCheckFailures int64 `json:"health_check_failures"`
}

// SessionMetrics is the body of GET /v1/metrics/sessions: totals and per
// template.
type SessionMetrics struct {
	SessionStats
	PoolSize    int64                   `json:"pool_size"`
	PoolHits    int64                   `json:"pool_hits"`
	PoolMisses  int64                   `json:"pool_misses"`
	PerTemplate map[string]SessionStats `json:"per_template"`
}

// Health is the body of /healthz and /readyz.
type Health struct {
	Status string            `json:"status"` // ok | unavailable
	Checks map[string]string `json:"checks,omitempty"`
}

// AuditList is the body of GET /v1/audit: the tenant's events, newest
// first.
type AuditList struct {
	Events []audit.Event `json:"events"`
}

// SecretRequest is the body of PUT /v1/secrets/{name}: a tenant's
// credential that only travels to Hosts, outside sandboxes
// (docs/network.md, "Secrets at the edge").
type SecretRequest struct {
	Value string   `json:"value"`
	Hosts []string `json:"hosts"`
	// Env names the variable that holds the placeholder in sandboxes.
	Env string `json:"env,omitempty"`
}

// Secret describes a stored secret; it never carries the value.
type Secret struct {
	Name        string    `json:"name"`
	Hosts       []string  `json:"hosts"`
	Env         string    `json:"env,omitempty"`
	Placeholder string    `json:"placeholder"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}
