// Package logkey names the attribute keys of sandlot's logs, in one file so
// that every package writes the same key for the same thing and a log
// query for tenant_id or sandbox_id finds every line about it. It holds
// constants only, so the agent and the daemon can both import it.
//
// Loggers: every Config that takes a *slog.Logger treats nil as discard
// (slog.New(slog.DiscardHandler)), never slog.Default(): a library does
// not write to the process's default logger behind its caller's back. The
// daemon's main (cli) and sandlot-agent's main pass their logger down.
package logkey

// Identity and resources.
const (
	Tenant = "tenant_id"
	// User is the end user of an identity ("" when it has none).
	User = "user_id"
	// Conversation and PathID are the rest of a session's key (with
	// Tenant and User): the conversation and the path within it.
	Conversation = "conversation_id"
	PathID       = "path_id"
	Context      = "context_id"
	Sandbox      = "sandbox_id"
	Template     = "template"
	Node         = "node"
	Provider     = "provider"
	Runtime      = "runtime"
	Tool         = "tool"
	Language     = "language"
	// Kernels names the kernels a warm pool's sandboxes start, joined by
	// commas ("" for none): a template can have two pools.
	Kernels = "kernels"
	Path    = "path"
)

// Events.
const (
	// Err carries an error's text. Error texts that can hold sandbox
	// output pass the guard before they are logged.
	Err    = "error"
	Reason = "reason"
	// Elapsed is a duration: every duration is logged in milliseconds,
	// its key ending in _ms (telemetry/export.Milliseconds).
	Elapsed = "elapsed_ms"
	Addr    = "addr"
)

// One line per HTTP request (api/server).
const (
	RequestID = "request_id"
	Method    = "method"
	Route     = "route"
	Status    = "status"
	Duration  = "duration_ms"
	Bytes     = "bytes"
)
