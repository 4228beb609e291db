// Package agent holds the protocol spoken between the daemon and
// sandlot-agent, the PID 1 of every local sandbox, plus the host-side client.
//
// The wire is JSON-RPC 2.0, one JSON object per line ("\n"-terminated), over
// a unix socket that the agent listens on inside a bind-mounted host
// directory. Requests are multiplexed by id. While a call runs, the agent
// sends notifications whose params carry "ref" (the call id) for streamed
// output; the final response ends the call.
//
// This package is imported by cmd/sandlot-agent, so it must not import
// anything from the daemon side.
package agent

import (
	"encoding/json"

	"github.com/sandlot/sandlot/errdefs"
)

// Version is the protocol version reported by ping.
const Version = "1"

// SocketDir and SocketName are the agent's default socket path. A local
// sandbox's agent is told where to listen by its runtime's channel
// (runtime.Runtime.Channel): an abstract name under crun and runc, this
// path, in a directory the runtime mounts for it, under runsc.
const (
	SocketDir  = "/run/sandlot"
	SocketName = "agent.sock"
)

// MaxFrame bounds one frame in either direction. Bigger payloads (files)
// are moved in chunks of at most ChunkSize.
const (
	MaxFrame  = 4 << 20
	ChunkSize = 1 << 20
)

// Method names.
const (
	MethodPing          = "ping"
	MethodExec          = "exec"           // ExecParams -> ExecResult, streams OutputEvent
	MethodSignal        = "exec.signal"    // SignalParams -> Empty
	MethodStdin         = "exec.stdin"     // StdinParams -> Empty
	MethodProcesses     = "exec.list"      // Empty -> ProcessList
	MethodAttach        = "exec.attach"    // AttachParams -> ExecResult, streams OutputEvent
	MethodRunCode       = "kernel.run"     // RunCodeParams -> RunCodeResult, streams OutputEvent
	MethodKernelRestart = "kernel.restart" // KernelParams -> Empty
	MethodReadFile      = "fs.read"        // ReadParams -> ReadResult
	MethodWriteFile     = "fs.write"       // WriteParams -> FileInfo
	MethodEditFile      = "fs.edit"        // EditParams -> EditResult
	MethodList          = "fs.list"        // ListParams -> ListResult
	MethodStat          = "fs.stat"        // PathParams -> FileInfo
	MethodMkdir         = "fs.mkdir"       // PathParams -> FileInfo
	MethodRemove        = "fs.remove"      // RemoveParams -> Empty
	MethodMove          = "fs.move"        // MoveParams -> FileInfo
	MethodGlob          = "fs.glob"        // GlobParams -> GlobResult
	MethodGrep          = "fs.grep"        // GrepParams -> GrepResult
	MethodSetEnv        = "env.set"        // SetEnvParams -> Empty
	// MethodRelease asks the agent to let go of its channel: once it has
	// answered it closes its listener and every connection, and listens
	// again as soon as it can bind (the host decides when: a sealed
	// channel directory refuses the bind until the host opens it). Under
	// gVisor a checkpoint cannot save a socket bound on the host, so the
	// host asks this first (runtime/oci checkpoint.go).
	MethodRelease = "channel.release" // ReleaseParams -> Empty
	// MethodRekey replaces the key the agent checks every new connection
	// against. A fork with memory restores the source's agent, which holds
	// the source's key, into a sandbox of its own: the host gives it the
	// fork's key before anything else, so the two never share one. Only
	// over a sealed session (the new key never crosses the channel in the
	// clear, and no relay can choose it); the connection that asked keeps
	// going, later ones must prove the new key.
	MethodRekey = "channel.rekey" // RekeyParams -> Empty

	// NotifyOutput carries OutputEvent for a running call.
	NotifyOutput = "output"

	// MethodCancel is a host→agent notification (no id): the caller of call
	// Ref gave up. The agent stops the work (kills the exec's process group,
	// interrupts the kernel) and still answers call Ref, which the host
	// ignores.
	MethodCancel = "cancel" // CancelParams, notification
)

// CancelParams is the params of a MethodCancel notification.
type CancelParams struct {
	Ref uint64 `json:"ref"`
}

// Request is a JSON-RPC 2.0 request or notification (ID absent).
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *uint64         `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Response is a JSON-RPC 2.0 response. Exactly one of Result and Error is set.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *uint64         `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// Frame is what the host decodes: a response (ID set, Method empty) or a
// notification (Method set, ID absent).
type Frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *uint64         `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error. Code uses the standard JSON-RPC codes plus
// the application codes below; Data.Category names an errdefs code
// ("not_found", "invalid_argument", ...) so the host can re-categorise.
type RPCError struct {
	Code    int        `json:"code"`
	Message string     `json:"message"`
	Data    *ErrorData `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return e.Message }

// ErrorData carries the errdefs category of an application error.
type ErrorData struct {
	Category errdefs.Code `json:"category"`
}

// JSON-RPC error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	CodeAppError       = -32000 // see ErrorData.Category
)

// Empty is the result of calls that return nothing.
type Empty struct{}

// PingResult answers MethodPing.
type PingResult struct {
	Version  string `json:"version"`
	UptimeMs int64  `json:"uptimeMs"`
	PID      int    `json:"pid"`
}

// The sandbox's users. Calls run as DefaultUser unless they name RootUser
// (params' User field): root of the sandbox's user namespace, which only a
// sandbox whose agent runs as that root (an image template) has; elsewhere
// a call as root is failed_precondition.
const (
	DefaultUser = "user"
	RootUser    = "root"
)

// Stream names used in OutputEvent.
const (
	Stdout = "stdout"
	Stderr = "stderr"
	Pty    = "pty"    // a terminal's output (ExecParams.Pty)
	Result = "result" // a rich result (RunCode only); Data is empty, Result set
	Start  = "start"  // process started (Exec only); PID set
)

// OutputEvent is the params of an "output" notification: a chunk of output
// from a running call. Chunks of one stream arrive in order.
type OutputEvent struct {
	Ref    uint64      `json:"ref"`
	Stream string      `json:"stream"`
	Data   string      `json:"data,omitempty"`
	Result *RichResult `json:"result,omitempty"`
	PID    int         `json:"pid,omitempty"`
}

// ExecParams runs a process. Exactly one of Argv and Shell is set; Shell is
// run with /bin/bash -c (or /bin/sh when bash is absent).
type ExecParams struct {
	Argv      []string          `json:"argv,omitempty"`
	Shell     string            `json:"shell,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Stdin     string            `json:"stdin,omitempty"`     // written, then stdin is closed unless KeepStdin
	KeepStdin bool              `json:"keepStdin,omitempty"` // leave stdin open for exec.stdin
	TimeoutMs int64             `json:"timeoutMs,omitempty"` // 0: the agent default (60 s), at most 10 min; negative: none (ends with the call or the sandbox)
	User      string            `json:"user,omitempty"`      // DefaultUser (""), or RootUser
	Tag       string            `json:"tag,omitempty"`       // caller's label, shown in exec.list
	MaxOutput int64             `json:"maxOutput,omitempty"` // bytes kept per stream; 0: default 1 MiB
	Stream    bool              `json:"stream,omitempty"`    // send output notifications
	// Pty runs the process on a terminal of that size (its session's
	// controlling terminal): its output is one stream, Pty, kept in
	// ExecResult.Stdout; stdin writes to the terminal, and stdin EOF
	// sends ^D.
	Pty *PtySize `json:"pty,omitempty"`
	// Detach keeps the process running when its call's connection drops
	// (the host restarts): its output is then kept, the oldest dropped
	// past DetachedOutput bytes, until an exec.attach takes it over and
	// gets the result. A cancel of the call still kills it.
	Detach bool `json:"detach,omitempty"`
}

// DetachedOutput bounds the output the agent keeps for a detached process
// while no call is attached to it.
const DetachedOutput = 1 << 20

// AttachParams names a detached process (ExecParams.Detach) whose
// connection dropped: the call streams its output (first what was kept
// meanwhile) and ends with its ExecResult, whose Stdout and Stderr are
// empty (the output went out as events). A process that is not detached,
// or whose result another attach took, is not found.
type AttachParams struct {
	PID int `json:"pid"`
}

// PtySize is a terminal's size in characters.
type PtySize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// ExecResult ends an exec call.
type ExecResult struct {
	PID        int    `json:"pid"`
	ExitCode   int    `json:"exitCode"`
	Signal     string `json:"signal,omitempty"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMs int64  `json:"durationMs"`
}

// SignalParams signals a running exec by pid ("SIGTERM", "SIGKILL", "SIGINT").
type SignalParams struct {
	PID    int    `json:"pid"`
	Signal string `json:"signal"`
	// Cols and Rows resize the terminal of an exec started with a Pty:
	// Signal "SIGWINCH" with a size sets it (the kernel then signals the
	// terminal's foreground group).
	Cols uint16 `json:"cols,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
}

// StdinParams writes to a running exec's stdin; EOF closes it.
type StdinParams struct {
	PID  int    `json:"pid"`
	Data string `json:"data,omitempty"`
	EOF  bool   `json:"eof,omitempty"`
}

// Process describes a running exec.
type Process struct {
	PID  int      `json:"pid"`
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd,omitempty"`
	Tag  string   `json:"tag,omitempty"`
}

// ProcessList answers MethodProcesses.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// Languages accepted by kernel.run. "sh" is one-shot; the others keep state.
const (
	Python     = "python"
	JavaScript = "javascript"
	TypeScript = "typescript"
	Bash       = "bash"
	Sh         = "sh"
	// R and Java need their interpreters in the sandbox's image (the
	// code-interpreter template has them).
	R    = "r"
	Java = "java"
	// PrestartIPython, as a prestart kernel, is the default python kernel
	// started with IPython already imported (RunCodeParams.IPython).
	PrestartIPython = "ipython"
)

// RunCodeParams runs code in the persistent kernel of a language. Kernel
// names a separate kernel instance of that language (E2B code contexts);
// empty is the default kernel.
type RunCodeParams struct {
	Language string `json:"language"`
	// Code is the cell. A typescript cell reaches the agent as the
	// JavaScript the host made of it (package agent/typescript), and runs
	// in the javascript kernel of the same name.
	Code      string            `json:"code"`
	Kernel    string            `json:"kernel,omitempty"`
	Env       map[string]string `json:"env,omitempty"`       // for this run only: restored after it
	TimeoutMs int64             `json:"timeoutMs,omitempty"` // 0: the agent default (60 s); -1: none, the run lasts until it is canceled
	MaxOutput int64             `json:"maxOutput,omitempty"` // bytes kept per stream; 0: default 1 MiB
	Stream    bool              `json:"stream,omitempty"`
	// User is who the kernel runs as: a kernel is one (language, kernel
	// name, user); "" is DefaultUser.
	User string `json:"user,omitempty"`
	// IPython runs a python cell through IPython's InteractiveShell
	// (magics, !cmd, get_ipython(), ? help, display hooks), as E2B's code
	// interpreter does. The kernel imports IPython on its first such cell
	// (unless prestarted as PrestartIPython) and keeps its state: plain and
	// IPython cells share one namespace. Other languages ignore it.
	IPython bool `json:"ipython,omitempty"`
}

// RichResult is one displayable value, Jupyter style: the value of the last
// expression (Main) or a figure/display call. Binary formats are base64.
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
	// Data is a table's columns (E2B's e2b/data): a pandas DataFrame's
	// columns as lists.
	Data json.RawMessage `json:"data,omitempty"`
	// Chart is what a matplotlib figure shows (E2B's chart: type, title,
	// axes, elements), beside its PNG.
	Chart json.RawMessage `json:"chart,omitempty"`
}

// ExecError is an error raised by user code.
type ExecError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// RunCodeResult ends a kernel.run call. Success is false when Error is set,
// when the run timed out, or (bash/sh) when ExitCode is nonzero.
type RunCodeResult struct {
	Success        bool         `json:"success"`
	Stdout         string       `json:"stdout"`
	Stderr         string       `json:"stderr"`
	Results        []RichResult `json:"results,omitempty"`
	Error          *ExecError   `json:"error,omitempty"`
	ExitCode       int          `json:"exitCode"`
	TimedOut       bool         `json:"timedOut,omitempty"`
	Truncated      bool         `json:"truncated,omitempty"`
	ExecutionCount int          `json:"executionCount"`
	DurationMs     int64        `json:"durationMs"`
	// KernelRestarted is set when the kernel had to be restarted (after a
	// timeout it could not interrupt, or a crash); its state is gone.
	KernelRestarted bool `json:"kernelRestarted,omitempty"`
}

// KernelParams names a kernel for restart.
type KernelParams struct {
	Language string `json:"language"`
	Kernel   string `json:"kernel,omitempty"`
	User     string `json:"user,omitempty"`
}

// FileInfo describes one file system entry. Paths are absolute inside the
// sandbox; relative paths in params resolve against /home/user.
type FileInfo struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Type    string `json:"type"` // "file", "dir", "symlink", "other"
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`    // permission bits
	ModTime int64  `json:"modTime"` // unix milliseconds
	Owner   string `json:"owner,omitempty"`
	Group   string `json:"group,omitempty"`
	Target  string `json:"target,omitempty"` // symlink target
	// Metadata is the file's user metadata: its extended attributes
	// user.e2b.<key> (E2B's envd keeps file metadata there).
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ReadParams reads up to Limit bytes (0: ChunkSize, at most ChunkSize) from Offset.
type ReadParams struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset,omitempty"`
	Limit  int64  `json:"limit,omitempty"`
	User   string `json:"user,omitempty"` // who the call runs as (DefaultUser, RootUser); relative paths resolve against their home
}

// ReadResult carries file bytes (base64 on the wire).
type ReadResult struct {
	Data []byte `json:"data"`
	Size int64  `json:"size"` // whole file size
	EOF  bool   `json:"eof"`
}

// WriteParams writes Data at Offset (Append appends; Truncate, the default
// for Offset 0 without Append, replaces the file). Parents are created.
type WriteParams struct {
	Path   string `json:"path"`
	Data   []byte `json:"data"`
	Offset int64  `json:"offset,omitempty"`
	Append bool   `json:"append,omitempty"`
	Mode   uint32 `json:"mode,omitempty"` // 0: 0644
	// Metadata is stored with the file (FileInfo.Metadata) by a write that
	// replaces it (Offset 0, no Append), which also drops what metadata the
	// file had, as a new file would have none.
	Metadata map[string]string `json:"metadata,omitempty"`
	User     string            `json:"user,omitempty"` // who the call runs as (DefaultUser, RootUser); relative paths resolve against their home
}

// EditParams replaces Old with New. Old must occur exactly once unless All.
// Missing: not_found category; not unique: failed_precondition.
type EditParams struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
	All  bool   `json:"all,omitempty"`
	User string `json:"user,omitempty"` // who the call runs as (DefaultUser, RootUser); relative paths resolve against their home
}

// EditResult reports how many replacements were made.
type EditResult struct {
	Replacements int `json:"replacements"`
}

// ListParams lists a directory; Depth 0 or 1 is the directory itself.
type ListParams struct {
	Path  string `json:"path"`
	Depth int    `json:"depth,omitempty"`
	User  string `json:"user,omitempty"` // who the call runs as (DefaultUser, RootUser); relative paths resolve against their home
}

// ListResult answers fs.list.
type ListResult struct {
	Entries []FileInfo `json:"entries"`
}

// PathParams names one path.
type PathParams struct {
	Path string `json:"path"`
	User string `json:"user,omitempty"` // who the call runs as (DefaultUser, RootUser); relative paths resolve against their home
}

// RemoveParams removes a path; a non-empty directory needs Recursive.
type RemoveParams struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
	User      string `json:"user,omitempty"` // who the call runs as (DefaultUser, RootUser); relative paths resolve against their home
}

// MoveParams renames From to To, creating To's parents.
type MoveParams struct {
	From string `json:"from"`
	To   string `json:"to"`
	User string `json:"user,omitempty"` // who the call runs as (DefaultUser, RootUser); relative paths resolve against their home
}

// GlobParams matches Pattern (with ** for any depth) under Root.
type GlobParams struct {
	Pattern string `json:"pattern"`
	Root    string `json:"root,omitempty"`
	Limit   int    `json:"limit,omitempty"` // 0: 1000
	User    string `json:"user,omitempty"`  // who the call runs as (DefaultUser, RootUser); relative paths resolve against their home
}

// GlobResult answers fs.glob, sorted.
type GlobResult struct {
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated,omitempty"`
}

// GrepParams searches files under Path (file or dir) for a RE2 Pattern.
type GrepParams struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path,omitempty"`
	Glob       string `json:"glob,omitempty"` // filter file names, e.g. "*.py"
	IgnoreCase bool   `json:"ignoreCase,omitempty"`
	Limit      int    `json:"limit,omitempty"` // max matches; 0: 500
	User       string `json:"user,omitempty"`  // who the call runs as (DefaultUser, RootUser); relative paths resolve against their home
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// GrepResult answers fs.grep.
type GrepResult struct {
	Matches   []GrepMatch `json:"matches"`
	Truncated bool        `json:"truncated,omitempty"`
}

// SetEnvParams adds variables to the sandbox's environment after it
// started (a sandbox from a warm pool learns its context's identity so,
// contexts.IdentityEnv): they join the base environment of every exec and
// kernel started from then on, and every run of a kernel that was already
// running gets them as it gets RunCodeParams.Env (set for the run, the
// run's own Env winning). A later call adds to and overrides an earlier
// one's. Names are [A-Za-z_][A-Za-z0-9_]*; values hold no NUL.
type SetEnvParams struct {
	Env map[string]string `json:"env"`
}

// RekeyParams is the agent's new key (MethodRekey): KeySize bytes.
type RekeyParams struct {
	Key []byte `json:"key"`
}

// ReleaseParams are MethodRelease's. Stop says the sandbox stops for its
// checkpoint (a suspend with memory): the gofer that may hold the sockets
// the agent moved aside goes with it, so once restored the agent removes
// them (each wake would otherwise use up one more of the channel's few
// inodes). A fork's checkpoint leaves the source running, its gofer too:
// no Stop, and the moved sockets stay.
type ReleaseParams struct {
	Stop bool `json:"stop,omitempty"`
}
