// Package api holds the wire types of sandlot's HTTP API (/v1), its error
// body, and the committed OpenAPI 3.1 document that describes them.
//
// The server (api/server) and the public Go client (client) both speak these
// types, so a field renamed here is renamed on both sides at once. They are
// the wire's own: api imports nothing of the daemon (only errdefs, for the
// error codes), so the client SDK links none of it. The server converts the
// daemon's types (contexts.Record, the agent's results, audit events) at
// the edge; a test there keeps each pair's JSON identical.
package api

import (
	_ "embed"
	"encoding/json"
	"time"

	"github.com/sandlot/sandlot/errdefs"
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
	// HeaderCallerRequest names the caller's own request (a chat turn)
	// that a tool call or a tool listing belongs to, at most 256 bytes:
	// after a call of that request failed to create its sandbox, the
	// request's code tools fail at once with that failure and are left
	// out of its tool list for a cool-off (docs/tools.md).
	HeaderCallerRequest = "X-Sandlot-Caller-Request"
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
	Code errdefs.Code `json:"code"`
	// Message is one sentence that says what happened and what to do
	// (errdefs.PublicMessage); the server's log has the whole chain.
	Message string `json:"message"`
	// RequestID is the request's id (as X-Request-Id) on a server fault
	// (5xx), whose log line it finds.
	RequestID string `json:"requestId,omitempty"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap maps the wire code back to its errdefs category, so errors.Is
// works on the client side.
func (e *Error) Unwrap() error { return errdefs.FromCode(e.Code) }

// DefaultPathID is the path a request names when it names none.
const DefaultPathID = "main"

// ToolRequest is the body of POST /v1/tools/{name}. Identity resolution:
// pathId defaults to "main", taskId stands in for a missing conversationId,
// and with neither a new conversationId is generated and returned. userId,
// optional, is the end user behind the tenant's key: part of the key, so
// two users who send the same conversationId get two sandboxes.
type ToolRequest struct {
	UserID         string          `json:"userId,omitempty"`
	ConversationID string          `json:"conversationId,omitempty"`
	PathID         string          `json:"pathId,omitempty"`
	TaskID         string          `json:"taskId,omitempty"`
	Args           json.RawMessage `json:"args,omitempty"`
	// Network is the network the call's context should have; absent:
	// loopback only, or whatever the context already has. It shapes the
	// context the call creates; on an existing context a different
	// network replaces its policy, which fails with failed_precondition
	// when the context was created without one (docs/network.md).
	Network *Network `json:"network,omitempty"`
	// Secrets are environment variables (name to value) whose values are
	// secret: run_code, run_analysis and bash get them in their
	// environment, and the egress guard masks each value, plain or
	// encoded, in everything that leaves the context from this call on
	// ([REDACTED:SECRET]). They are the caller's, not the model's: a model
	// sees the names at most. Values are 8 to 4096 bytes.
	Secrets map[string]string `json:"secrets,omitempty"`
}

// Network is a sandbox's network policy on the wire (docs/network.md):
// mode none (the default: no egress, ports only), allowlist or open; rules
// are text ("example.org", "*.example.org", "api.example.org:443",
// "203.0.113.0/24"); deny wins over allow. The operator's caps bound it
// (permission_denied).
type Network struct {
	Mode    string           `json:"mode,omitempty"`
	Allow   []string         `json:"allow,omitempty"`
	Deny    []string         `json:"deny,omitempty"`
	Headers []NetworkHeaders `json:"headers,omitempty"`
	Ingress NetworkIngress   `json:"ingress,omitzero"`
	// Secrets names the tenant's secrets (/v1/secrets) the sandbox may
	// use: it sees placeholders, the proxy puts the values into requests
	// to the secrets' hosts.
	Secrets []string `json:"secrets,omitempty"`
}

// NetworkHeaders sets headers on the HTTPS requests to Host ("*." for
// subdomains); values may hold secret placeholders.
type NetworkHeaders struct {
	Host    string            `json:"host"`
	Headers map[string]string `json:"headers"`
}

// NetworkIngress says who reaches the sandbox's ports: by default the
// tenant's API key or the sandbox's traffic token; Public: anyone.
type NetworkIngress struct {
	Public          bool   `json:"public,omitempty"`
	MaskRequestHost string `json:"maskRequestHost,omitempty"`
}

// RunCodeArgs are the args of the run_code tool. Timeout is in
// milliseconds (1000 to 600000; 0 means the server default).
type RunCodeArgs struct {
	Language    string `json:"language"`
	Code        string `json:"code"`
	Description string `json:"description,omitempty"`
	Timeout     int64  `json:"timeout,omitempty"`
	// Template (name or id) of the context's sandbox when this call
	// creates the context.
	Template string `json:"template,omitempty"`
	// Env holds environment variables for this run only.
	Env map[string]string `json:"env,omitempty"`
}

// PathRef names the conversation path a tool call ran in. Every tool's
// result carries it (embedded first), so a caller that sent no
// conversationId learns the one the server generated.
type PathRef struct {
	UserID         string `json:"userId,omitempty"`
	ConversationID string `json:"conversationId"`
	PathID         string `json:"pathId"`
}

// SetPathRef sets the reference; the tool registry calls it on every
// result it returns.
func (p *PathRef) SetPathRef(r PathRef) { *p = r }

// RunCodeResult is the result of the run_code tool, over HTTP and MCP
// alike (the tools package returns it as tools.RunCodeResult).
type RunCodeResult struct {
	PathRef
	Success         bool         `json:"success"`
	Stdout          string       `json:"stdout"`
	Stderr          string       `json:"stderr"`
	ExitCode        int          `json:"exitCode"`
	ExecutionTimeMs int64        `json:"executionTimeMs"`
	SandboxID       string       `json:"sandboxId"`
	ContextID       string       `json:"contextId,omitempty"`
	Results         []RichResult `json:"results"`
	Error           *ExecError   `json:"error"`
	TimedOut        bool         `json:"timedOut,omitempty"`
	KernelRestarted bool         `json:"kernelRestarted,omitempty"`
	// Rotated: this call used up the context's executions; the context
	// ended after it and the next call starts in a fresh sandbox (no
	// variables, imports or files carry over).
	Rotated bool `json:"rotated,omitempty"`
	// StateLost: the state of the earlier calls (variables, files,
	// installed packages) is gone. On a result that ran, the sandbox was
	// found lost before this call and the call ran once in a fresh one;
	// on a failed result (error SandboxLost), the sandbox was lost while
	// this call ran and the next call starts in a fresh one. The code of
	// a call is never run twice.
	StateLost bool `json:"stateLost,omitempty"`
	// Woken: the context was suspended to disk and woke for this call:
	// its files are as they were, its kernels started fresh (the
	// variables, imports and processes of earlier calls are gone).
	Woken bool `json:"woken,omitempty"`
	// Restored: the context was suspended with its memory (runsc) and
	// was restored for this call: its files, kernels, variables and
	// processes are as they were; nothing was lost.
	Restored bool `json:"restored,omitempty"`
	// Notice says in a sentence, for a model, what happened to the
	// sandbox's state (StateLost, Rotated, Woken); empty otherwise.
	Notice string `json:"notice,omitempty"`
	// Truncated is set when any field was cut to the tools' MaxOutput
	// characters (or by the agent's own output bound).
	Truncated bool `json:"truncated"`
	// OutputType is error when the run failed (success false: an error
	// raised, a timeout, a failure of the call). Otherwise it classifies
	// stdout (or the main result's text when stdout is empty): json,
	// table or text. A result carrying an HTML table (a pandas DataFrame)
	// is a table.
	OutputType string `json:"outputType"`
}

// RichResult is one rich output of run_code: the value of the last
// expression (Main) or a displayed object (a figure), in every format the
// kernel produced. Images are base64.
type RichResult struct {
	Main       bool            `json:"main,omitempty"`
	Text       string          `json:"text,omitempty"`
	HTML       string          `json:"html,omitempty"`
	Markdown   string          `json:"markdown,omitempty"`
	SVG        string          `json:"svg,omitempty"`
	PNG        string          `json:"png,omitempty"`
	JPEG       string          `json:"jpeg,omitempty"`
	LaTeX      string          `json:"latex,omitempty"`
	JSON       json.RawMessage `json:"json,omitempty"`
	JavaScript string          `json:"javascript,omitempty"`
	// Data is a table's columns as lists (a pandas DataFrame's).
	Data json.RawMessage `json:"data,omitempty"`
	// Chart is what a matplotlib figure shows (E2B's chart shape).
	Chart json.RawMessage `json:"chart,omitempty"`
}

// ExecError is an error raised by the user's code.
type ExecError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
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
	// Result is a RichResult for type result, the tool's result for
	// type final.
	Result  json.RawMessage `json:"result,omitempty"`
	Code    errdefs.Code    `json:"code,omitempty"` // type error
	Message string          `json:"message,omitempty"`
}

// Path event types.
const (
	PathBranched = "branched"
	PathEdited   = "edited"
	PathMerged   = "merged"
	PathDeleted  = "deleted"
	PathArchived = "archived"
)

// ConversationEnded answers DELETE /v1/conversations/{c}: the contexts of
// every path of the conversation are terminated (reason deleted).
type ConversationEnded struct {
	UserID         string `json:"userId,omitempty"`
	ConversationID string `json:"conversationId"`
	Terminated     int    `json:"terminated"` // contexts ended by this call
}

// PathEvent is the body of POST /v1/conversations/{c}/paths/{p}/events.
// For branched, sourcePathId names the path the new one branches from; for
// merged, targetPathId names the path this one merges into.
type PathEvent struct {
	Type         string `json:"type"`
	SourcePathID string `json:"sourcePathId,omitempty"`
	TargetPathID string `json:"targetPathId,omitempty"`
}

// FileInfo describes a file in a sandbox: an entry of FileList and the
// body of an upload's answer.
type FileInfo struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Type    string `json:"type"` // file, dir, symlink, other
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`    // permission bits
	ModTime int64  `json:"modTime"` // unix milliseconds
	Owner   string `json:"owner,omitempty"`
	Group   string `json:"group,omitempty"`
	Target  string `json:"target,omitempty"` // symlink target
	// Metadata is the file's user metadata (extended attributes
	// user.e2b.<key>, as E2B keeps it).
	Metadata map[string]string `json:"metadata,omitempty"`
}

// FileList is the body of GET .../files/list.
type FileList struct {
	Path    string     `json:"path"`
	Entries []FileInfo `json:"entries"`
}

// SessionStats is one row of GET /v1/metrics/sessions.
type SessionStats struct {
	ActiveSessions      int64 `json:"active_sessions"`
	TotalCreated        int64 `json:"total_created"`
	TotalReused         int64 `json:"total_reused"`
	TotalCleaned        int64 `json:"total_cleaned"`    // ended for being idle
	TotalTerminated     int64 `json:"total_terminated"` // ended for any reason
	HealthCheckFailures int64 `json:"health_check_failures"`
}

// SessionMetrics is the body of GET /v1/metrics/sessions: the counters of
// one tenant's sessions (the caller's; an admin's key may ask for any
// tenant's, or for every tenant's). Execution and Desktop are each
// session manager's own (desktop sessions are the contexts of the desktop
// template), Totals their sum, which the top-level counters repeat (the
// wire's first form). Pool hits and misses are the tenant's creates';
// PoolSize is the warm sandboxes ready now, which belong to no tenant.
type SessionMetrics struct {
	SessionStats
	PoolSize    int64                   `json:"pool_size"`
	PoolHits    int64                   `json:"pool_hits"`
	PoolMisses  int64                   `json:"pool_misses"`
	PerTemplate map[string]SessionStats `json:"per_template"`
	Execution   SessionStats            `json:"execution"`
	Desktop     SessionStats            `json:"desktop"`
	Totals      SessionStats            `json:"totals"`
	// Tenant is the tenant counted; "*" for every tenant (an admin's
	// view without ?tenant=).
	Tenant string `json:"tenant"`
}

// Health is the body of /healthz (/readyz answers a Readiness).
type Health struct {
	Status string            `json:"status"` // ok | unavailable
	Checks map[string]string `json:"checks,omitempty"`
}

// Version is the body of GET /v1/version and of `sandlot version -o
// json`: the build's version, the commit it was built from ("" when the
// build recorded none) and the newest store schema it knows.
type Version struct {
	Version       string `json:"version"`
	Commit        string `json:"commit,omitempty"`
	SchemaVersion int    `json:"schemaVersion"`
}

// TenantInfo is the body of GET /v1/tenant: the tenant the request's key
// belongs to. The key decides the tenant; a client that is handed a tenant
// id (specification 001's identity) checks it against this one.
type TenantInfo struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Admin bool   `json:"admin,omitempty"`
}

// AuditList is the body of GET /v1/audit: the tenant's events, newest
// first.
type AuditList struct {
	Events []AuditEvent `json:"events"`
}

// AuditEvent is one event of a tenant's audit trail: a guard finding
// (kind guard.finding; detail type, mode, start, end and hmac, never the
// value) or a change to the tenant (tenant.created, tenant.key_rotated).
type AuditEvent struct {
	ID        int64             `json:"id"`
	TenantID  string            `json:"tenantId,omitempty"`
	ContextID string            `json:"contextId,omitempty"`
	Kind      string            `json:"kind"`
	Detail    map[string]string `json:"detail,omitempty"`
	At        time.Time         `json:"at"`
}

// SecretRequest is the body of PUT /v1/secrets/{name}: a tenant's
// credential that only travels to Hosts, outside sandboxes
// (docs/network-egress.md, "Secrets at the edge").
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

// TemplateSettings are what a sandbox of a template starts with
// (docs/images-templates.md, "Templates"); zero values mean the image's or the
// daemon's.
type TemplateSettings struct {
	User     string            `json:"user,omitempty"`
	Workdir  string            `json:"workdir,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	StartCmd string            `json:"startCmd,omitempty"`
	// Kernels are the languages run_code offers (python, javascript,
	// typescript, bash, sh, r, java); empty: all.
	Kernels  []string `json:"kernels,omitempty"`
	Prestart []string `json:"prestart,omitempty"`
	// IdleSuspendSeconds suspends the template's idle contexts to disk
	// after that long without a call; the smallest of the daemon's, the
	// template's and the tenant's wins. 0: none of the template's.
	IdleSuspendSeconds int64             `json:"idleSuspendSeconds,omitempty"`
	Resources          TemplateResources `json:"resources,omitempty"`
}

// TemplateResources are a template's defaults for its sandboxes' limits.
type TemplateResources struct {
	CPUs        float64 `json:"cpus,omitempty"`
	MemoryBytes int64   `json:"memoryBytes,omitempty"`
	DiskBytes   int64   `json:"diskBytes,omitempty"`
	PIDs        int64   `json:"pids,omitempty"`
}

// TemplateRequest is the JSON body of POST /v1/templates: pull Ref from
// its registry as the tenant's template Name. (An import sends the
// tarball as the body instead, with name and settings in the query.)
type TemplateRequest struct {
	Name     string           `json:"name"`
	Ref      string           `json:"ref"`
	Settings TemplateSettings `json:"settings"`
}

// Template describes a template: a built-in, the tenant's own, or a public
// one (Public).
type Template struct {
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	Public    bool             `json:"public"`
	BuiltIn   bool             `json:"builtIn,omitempty"`
	Image     string           `json:"image,omitempty"`
	Source    string           `json:"source,omitempty"`
	Settings  TemplateSettings `json:"settings"`
	CreatedAt time.Time        `json:"createdAt,omitzero"`
}

// TemplateList is the body of GET /v1/templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
}

// TemplateBuildRequest is the JSON body of POST /v1/templates/builds for a
// build without a context (a Dockerfile whose steps COPY nothing). A build
// with a context sends the context's tarball as the body instead, with
// name, dockerfile (its path in the context), buildArg and settings in the
// query.
type TemplateBuildRequest struct {
	// Name is the template's name, NAME or NAME:TAG.
	Name string `json:"name"`
	// Dockerfile is the Dockerfile's text (docs/images.md's subset).
	Dockerfile string            `json:"dockerfile"`
	BuildArgs  map[string]string `json:"buildArgs,omitempty"`
	// Settings override, field by field, what the build gives the
	// template (the image's user and workdir).
	Settings TemplateSettings `json:"settings,omitzero"`
}

// Statuses of a template build.
const (
	BuildWaiting  = "waiting"
	BuildBuilding = "building"
	BuildReady    = "ready"
	BuildError    = "error"
)

// TemplateBuild is a template build's state: the answer of POST
// /v1/templates/builds (202) and GET /v1/templates/builds/{buildId}.
type TemplateBuild struct {
	BuildID string `json:"buildId"`
	Name    string `json:"name"`
	// Status is waiting, building, ready or error.
	Status string `json:"status"`
	// Logs are the log's entries from the logsOffset asked for (guarded
	// output of the steps); LogsNext is the offset to ask for next.
	Logs     []TemplateBuildLog `json:"logs"`
	LogsNext int                `json:"logsNext"`
	// Template is the template made, when ready.
	Template *Template `json:"template,omitempty"`
	// Reason is why the build failed, when error.
	Reason string `json:"reason,omitempty"`
}

// TemplateBuildLog is one line of a build's log.
type TemplateBuildLog struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
}

// ShellProtocol is the Upgrade token of GET .../shell: after the 101
// answer, the connection carries one JSON object per line each way,
// ShellInput from the client and ShellOutput from the server.
const ShellProtocol = "sandlot-shell"

// ShellKeyProtocolPrefix starts the second subprotocol a browser's
// WebSocket to GET .../shell offers, after ShellProtocol: the API key,
// which a page cannot send in a header there.
const ShellKeyProtocolPrefix = "sandlot-key."

// ShellInput is one line from the client of a shell: keystrokes (Stdin),
// a new terminal size (Resize), or the end of input (EOF, which the
// terminal reads as ^D).
type ShellInput struct {
	Stdin  string     `json:"stdin,omitempty"`
	Resize *ShellSize `json:"resize,omitempty"`
	EOF    bool       `json:"eof,omitempty"`
}

// ShellSize is a terminal's size in characters, 1 to 1000 each way.
type ShellSize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Shell output types.
const (
	ShellData  = "data"  // the terminal's output, guarded
	ShellExit  = "exit"  // the shell ended; the last line
	ShellError = "error" // the session failed; the last line
)

// ShellOutput is one line from the server of a shell.
type ShellOutput struct {
	Type     string       `json:"type"`
	Data     string       `json:"data,omitempty"`
	ExitCode int          `json:"exitCode,omitempty"` // type exit
	Code     errdefs.Code `json:"code,omitempty"`     // type error
	Message  string       `json:"message,omitempty"`  // type error
}
