// Package tools is the tool registry agents call: run_code, run_analysis,
// bash and the file tools, each with a JSON Schema (draft 2020-12) that is
// enforced on every call and exported for OpenAI function calling,
// Anthropic tool use and MCP.
//
// Tools reach sandboxes only through Contexts (the execution-context
// manager). The manager guards what comes back (Execute results and the
// sandbox passed to Use), so tools do not call the guard; they bound what
// they return (MaxOutput characters per field, truncated: true).
//
// bash vs run_code with language bash: the bash tool runs each command in a
// fresh `bash -c` process through Sandbox.Exec (it honours cwd, and nothing
// survives the call), while run_code language bash runs in the context's
// persistent bash kernel, where variables, functions and the working
// directory carry over between calls.
package tools

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/telemetry"
)

// Contexts is what tools need of the execution-context manager
// (contexts.Manager implements it).
type Contexts interface {
	Execute(ctx context.Context, id contexts.Identity, req contexts.ExecuteRequest, out contexts.OutputFunc) (*contexts.ExecuteResult, error)
	Use(ctx context.Context, id contexts.Identity, opts contexts.CreateOptions, fn func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error) error
}

var _ Contexts = (*contexts.Manager)(nil)

// DefaultMaxOutput is the number of characters kept of one output field.
const DefaultMaxOutput = 50000

// Config tunes a Registry. The zero value is ready to use.
type Config struct {
	// MaxOutput bounds each returned text field (stdout, stderr, file
	// content, ...) in characters. 0: DefaultMaxOutput.
	MaxOutput int
	// Create is passed to Contexts.Use and applies when a call creates
	// its context. Zero: the manager's defaults.
	Create contexts.CreateOptions
	// MaxCodeBytes is the manager's code size limit (contexts.Config.
	// MaxCodeBytes), advertised to models in the schemas of the tools that
	// take code, so a model is told the limit the manager enforces.
	// 0: contexts.DefaultMaxCodeBytes.
	MaxCodeBytes int
	// Unavailable, when set, says why no sandbox can be had (the daemon
	// found no usable provider): the registry then offers no tool, since
	// every tool runs in a sandbox, and a call fails with this error. A
	// model is never offered a tool that cannot work.
	Unavailable error
	// Desktop, when set, adds the desktop tools (desktop.go): a desktop
	// session per conversation path, beside its execution context.
	Desktop Desktop
	// TTL and MaxExecutions are the manager's idle TTL and rotation limit
	// (contexts.Config.TTL, MaxExecutionsPerContext), which the code
	// tools' descriptions and Lifecycle tell a model: how long the state
	// of its sandbox lasts. Zero: the manager's defaults (Create.TTL, when
	// set, is the TTL of the contexts the registry creates); a negative
	// MaxExecutions: no rotation.
	TTL           time.Duration
	MaxExecutions int64
	// CreateCooloff is how long the code tools stay withdrawn from a
	// request (Call.Request) after one of its calls failed to create its
	// sandbox. Zero: DefaultCreateCooloff; negative: never withdrawn.
	CreateCooloff time.Duration
	// Logger receives one debug line per call. nil discards.
	Logger *slog.Logger
	// OnCall, when set, is called after every call (for telemetry spans
	// and metrics). It must not block.
	OnCall func(ctx context.Context, ev CallEvent)
}

// CallEvent describes one finished call.
type CallEvent struct {
	Tool     string
	Identity contexts.Identity
	// Forced is set when the call came from a direct invocation (forceTool:
	// a UI button or the HTTP tool route) rather than a model's choice.
	Forced   bool
	Duration time.Duration
	Err      error // nil on success; a tool-level failure (success: false) is not an error
}

// Tool describes one tool.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Call is one invocation.
type Call struct {
	Name     string
	Identity contexts.Identity
	Args     json.RawMessage
	// Forced marks a direct invocation by a caller (forceTool) rather
	// than a model's choice; it is reported in CallEvent and the log.
	Forced bool
	// Network is the network the call's context should have
	// (contexts.CreateOptions.Network); nil: Config.Create's.
	Network *policy.Policy
	// EdgeArgs are the argument names the calling edge accepts besides
	// the tool's own and took out of Args (MCP's conversationId, pathId,
	// taskId): a message about an unknown field lists them as allowed.
	EdgeArgs []string
	// Request names the caller's request the call belongs to (an MCP
	// session, a /v1 caller's request id with its tenant), "" none: after
	// a call of a request fails to create its sandbox, the code tools are
	// withdrawn from that request for Config.CreateCooloff (withdraw.go).
	Request string
}

// create returns the options for a context the call creates.
func (r *Registry) create(call Call) contexts.CreateOptions {
	opts := r.cfg.Create
	if call.Network != nil {
		opts.Network = call.Network
	}
	return opts
}

// handler runs a tool with validated args.
type handler func(ctx context.Context, call Call, args map[string]any, out contexts.OutputFunc) (any, error)

type entry struct {
	tool   Tool
	schema *schema
	run    handler
}

// Registry holds the tools. It is safe for concurrent use; its only
// mutable state after New is the requests it withdrew the code tools from.
type Registry struct {
	c       Contexts
	cfg     Config
	log     *slog.Logger
	entries map[string]*entry
	order   []string
	// withdrawn holds the requests whose code tools are withdrawn after
	// a creation failure (withdraw.go), the registry's one mutable state.
	withdrawn withdrawals
}

//go:embed schemas/*.json
var schemaFS embed.FS

// descriptions are the model-facing tool descriptions.
var descriptions = map[string]string{
	"run_code": "Run code in this conversation's sandbox. python, javascript, typescript, bash, r and java keep state between calls " +
		"(variables, imports, files); sh runs once. Returns stdout, stderr, the value of the last expression and any " +
		"figures. Files persist under /home/user. There is no network access unless the caller gave this conversation one.",
	"run_analysis": "Run a structured analysis in the sandbox. Built-in programs (when code is omitted): tax_calculation " +
		"(progressive brackets), compliance_check (rules against a record) and data_analysis (summary statistics of " +
		"rows or a CSV file). custom runs your code, which receives the parameters as params. The output is parsed " +
		"according to outputFormat into parsedOutput.",
	"bash": "Run one shell command (bash -c) in the sandbox and return its stdout, stderr and exit code. Each call is a " +
		"fresh process; use run_code with language bash for a persistent shell.",
	"read_file":  "Read a text file from the sandbox, by lines (offset is the first line, counting from 1). Binary files are refused.",
	"write_file": "Create or overwrite a text file in the sandbox. Parent directories are created.",
	"edit_file": "Replace an exact string in a sandbox file. old_string must occur exactly once, unless replace_all " +
		"is true; include surrounding context to make it unique.",
	"list_files": "List a directory in the sandbox (name, type, size), optionally a few levels deep.",
	"glob":       "Find files in the sandbox whose paths match a glob pattern (** matches any depth).",
	"grep":       "Search sandbox files for a regular expression (RE2) and return matching lines with their paths and line numbers.",
	"fork_sandbox": "Fork this conversation's sandbox onto another path of the conversation (to_path), to try something " +
		"without losing the current state: the fork starts with a copy of this sandbox's files, and this sandbox runs on " +
		"unchanged. Use the fork by calling the tools with pathId set to to_path. The result says whether memory " +
		"(variables, imports, processes) was kept; where it was not, the fork's kernels start fresh.",
	"suspend_sandbox": "Suspend this conversation's sandbox to disk when you will not need it for a while: its files are kept " +
		"and its memory is freed. The next call on this conversation path wakes it with its files; variables, imports " +
		"and running processes start fresh (the woken call's result says so).",
}

// New returns a registry over c.
func New(c Contexts, cfg Config) *Registry {
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxCodeBytes <= 0 {
		cfg.MaxCodeBytes = contexts.DefaultMaxCodeBytes
	}
	r := &Registry{c: c, cfg: cfg, log: log, entries: map[string]*entry{}, withdrawn: withdrawals{now: time.Now}}
	handlers := map[string]handler{
		"run_code":        r.runCode,
		"run_analysis":    r.runAnalysis,
		"bash":            r.bash,
		"read_file":       r.readFile,
		"write_file":      r.writeFile,
		"edit_file":       r.editFile,
		"list_files":      r.listFiles,
		"glob":            r.glob,
		"grep":            r.grep,
		"suspend_sandbox": r.suspendSandbox,
		"fork_sandbox":    r.forkSandbox,
	}
	if cfg.Desktop != nil {
		for name, h := range r.desktopHandlers() {
			handlers[name] = h
		}
	}
	for name, h := range handlers {
		raw, err := schemaFS.ReadFile("schemas/" + name + ".json")
		if err != nil {
			panic(fmt.Sprintf("tools: schema of %s: %v", name, err)) // embedded: a build defect
		}
		if reserve, ok := codeTools[name]; ok {
			if raw, err = limitCode(raw, cfg.MaxCodeBytes-reserve); err != nil {
				panic(fmt.Sprintf("tools: schema of %s: %v", name, err))
			}
		}
		var s schema
		if err := json.Unmarshal(raw, &s); err != nil {
			panic(fmt.Sprintf("tools: schema of %s: %v", name, err))
		}
		compact, err := compactJSON(raw)
		if err != nil {
			panic(fmt.Sprintf("tools: schema of %s: %v", name, err))
		}
		desc := descriptions[name] + desktopDescriptions[name]
		if keeps, ok := statefulTools[name]; ok {
			desc += " " + r.lifecycle(keeps)
		}
		r.entries[name] = &entry{
			tool:   Tool{Name: name, Description: desc, InputSchema: compact},
			schema: &s,
			run:    h,
		}
		r.order = append(r.order, name)
	}
	sort.Strings(r.order)
	return r
}

// Tools lists the tools, sorted by name.
func (r *Registry) Tools() []Tool {
	if r.cfg.Unavailable != nil {
		return []Tool{}
	}
	out := make([]Tool, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.entries[n].tool)
	}
	return out
}

// Validate checks args against the schema of tool name without running it.
func (r *Registry) Validate(name string, args json.RawMessage) error {
	e, ok := r.entries[name]
	if !ok {
		return fmt.Errorf("tool %q: %w", name, errdefs.ErrNotFound)
	}
	_, err := e.schema.validate(name, args)
	return err
}

// Call validates call.Args against the tool's schema and runs it. The
// result is the tool's JSON result struct (e.g. *RunCodeResult), which
// carries the call's conversation and path (api.PathRef). Errors are
// errdefs categories: an unknown tool is ErrNotFound, bad arguments
// ErrInvalidArgument; a program that fails is a result with success false,
// not an error, and so is a call that met a context limit or lost its
// sandbox (contexts.Failure): the result names it in its error.
func (r *Registry) Call(ctx context.Context, call Call, out contexts.OutputFunc) (any, error) {
	start := time.Now()
	ctx, span := startSpan(ctx, call)
	res, err := r.call(ctx, call, out)
	if p, ok := res.(interface{ SetPathRef(api.PathRef) }); ok && err == nil {
		p.SetPathRef(api.PathRef{UserID: call.Identity.UserID, ConversationID: call.Identity.ConversationID, PathID: call.Identity.PathID})
	}
	telemetry.EndSpan(span, err)
	d := time.Since(start)
	r.log.DebugContext(ctx, "tool call", logkey.Tool, call.Name, logkey.Tenant, call.Identity.TenantID, logkey.User, call.Identity.UserID,
		logkey.Conversation, call.Identity.ConversationID, logkey.PathID, call.Identity.PathID,
		"forced", call.Forced, slog.Duration(logkey.Duration, d), "code", string(errdefs.CodeOf(err)), "ok", err == nil)
	if r.cfg.OnCall != nil {
		r.cfg.OnCall(ctx, CallEvent{Tool: call.Name, Identity: call.Identity, Forced: call.Forced, Duration: d, Err: err})
	}
	return res, err
}

func (r *Registry) call(ctx context.Context, call Call, out contexts.OutputFunc) (any, error) {
	e, ok := r.entries[call.Name]
	if !ok {
		return nil, fmt.Errorf("tool %q: %w", call.Name, errdefs.ErrNotFound)
	}
	if r.cfg.Unavailable != nil {
		return nil, fmt.Errorf("tool %q: no sandbox can run it: %w", call.Name, r.cfg.Unavailable)
	}
	if err := r.refuseWithdrawn(call); err != nil {
		return nil, err
	}
	args, err := e.schema.validate(call.Name, call.Args, call.EdgeArgs...)
	if err != nil {
		return nil, err
	}
	res, err := e.run(ctx, call, args, out)
	if err != nil {
		r.noteCreateFailure(call, err)
		return failure(call.Name, err)
	}
	return res, nil
}

// codeTools are the tools whose "code" argument goes to the manager's
// Execute and so meets its code size limit, with the bytes each adds to
// the code before it runs: run_analysis prefixes the parameters prelude
// (at most inlineParamsMax base64-encoded plus a few hundred bytes).
var codeTools = map[string]int{"run_code": 0, "run_analysis": analysisPreludeReserve}

// analysisPreludeReserve bounds the length of paramsPrelude's output.
const analysisPreludeReserve = (inlineParamsMax/3+1)*4 + 1024

// limitCode sets the maxLength of the schema's code property to the
// manager's limit and states it in the property's description: the schema
// files carry no number of their own, so the advertised and the enforced
// limit cannot drift apart.
func limitCode(raw []byte, limit int) ([]byte, error) {
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	props, _ := s["properties"].(map[string]any)
	code, ok := props["code"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no code property")
	}
	code["maxLength"] = limit
	desc, _ := code["description"].(string)
	code["description"] = strings.TrimSpace(desc + " " + codeLimitText(limit))
	return json.Marshal(s)
}

// codeLimitText says the code size limit in words for models. maxLength
// counts characters and the manager counts bytes; the text says bytes so
// a model writing non-ASCII code is not misled.
func codeLimitText(limit int) string {
	if limit%1024 == 0 {
		return fmt.Sprintf("At most %d KB (%d bytes); split larger programs into several calls or write them to a file first.", limit/1024, limit)
	}
	return fmt.Sprintf("At most %d bytes; split larger programs into several calls or write them to a file first.", limit)
}

func compactJSON(raw []byte) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Argument accessors. The schema has been enforced, so types are known;
// absent fields give the zero value.

func str(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return s
}

func integer(args map[string]any, k string) int64 {
	n, ok := args[k].(json.Number)
	if !ok {
		return 0
	}
	if i, err := n.Int64(); err == nil {
		return i
	}
	f, _ := n.Float64()
	return int64(f)
}

func boolean(args map[string]any, k string) bool {
	b, _ := args[k].(bool)
	return b
}

// callEnv is the environment of a call that runs code: its env argument
// plus the secrets the caller declared (contexts.WithSecrets), checked by
// contexts.CheckEnv. The schema has already bounded env's size and made
// its values strings.
func callEnv(ctx context.Context, tool string, args map[string]any) (map[string]string, error) {
	raw, _ := args["env"].(map[string]any)
	secrets := contexts.SecretsFrom(ctx)
	if len(raw) == 0 && len(secrets) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(raw)+len(secrets))
	for k, v := range raw {
		env[k], _ = v.(string)
	}
	if err := contexts.CheckEnv(env, secrets); err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	for k, v := range secrets {
		env[k] = v
	}
	return env, nil
}
