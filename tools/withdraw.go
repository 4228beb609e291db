package tools

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// After a sandbox creation failure the code tools are withdrawn for the
// rest of the caller's request (000 §8.5): the caller names its request
// (Call.Request: an MCP session, or the /v1 header X-Sandlot-Caller-Request
// of a tenant), and for Config.CreateCooloff after a call of that request
// failed to create its sandbox, the tools that run in the conversation's
// execution context fail at once with that failure instead of trying to
// create again, and ToolsFor leaves them out. A request that names
// nothing is never withdrawn from.

// DefaultCreateCooloff is how long the code tools stay withdrawn from a
// request after a creation failure.
const DefaultCreateCooloff = 30 * time.Second

// maxWithdrawals bounds the requests remembered at once; beyond it the
// oldest withdrawal is forgotten first (its request may try again).
const maxWithdrawals = 10_000

// contextTools are the tools that run in the conversation's execution
// context, withdrawn after a creation failure: the code tools and the file
// tools, which would create the same sandbox, and suspend_sandbox and
// fork_sandbox, which have none to act on. The desktop tools run in a
// sandbox of their own and stay.
var contextTools = map[string]bool{
	"run_code": true, "run_analysis": true, "bash": true, "read_file": true, "write_file": true,
	"edit_file": true, "list_files": true, "glob": true, "grep": true, "suspend_sandbox": true,
	"fork_sandbox": true,
}

// withdrawal is one request's withdrawn code tools.
type withdrawal struct {
	err   error // the creation failure, answered again
	until time.Time
}

// withdrawals are the requests whose code tools are withdrawn.
type withdrawals struct {
	mu    sync.Mutex
	m     map[string]withdrawal
	order []string // insertion order, for eviction
	now   func() time.Time
}

func (w *withdrawals) get(request string) (withdrawal, bool) {
	if request == "" {
		return withdrawal{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wd, ok := w.m[request]
	if ok && !w.now().Before(wd.until) {
		delete(w.m, request)
		return withdrawal{}, false
	}
	return wd, ok
}

func (w *withdrawals) add(request string, err error, cooloff time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]withdrawal{}
	}
	now := w.now()
	if _, ok := w.m[request]; !ok {
		w.order = append(w.order, request)
	}
	w.m[request] = withdrawal{err: err, until: now.Add(cooloff)}
	for len(w.m) > maxWithdrawals || len(w.order) > 2*maxWithdrawals {
		old := w.order[0]
		w.order = w.order[1:]
		if wd, ok := w.m[old]; ok && (len(w.m) > maxWithdrawals || !now.Before(wd.until)) {
			delete(w.m, old)
		}
	}
}

// WithdrawnUntil reports until when the code tools are withdrawn from
// request after a creation failure; the zero time when they are not.
func (r *Registry) WithdrawnUntil(request string) time.Time {
	wd, _ := r.withdrawn.get(request)
	return wd.until
}

// ToolsFor lists the tools offered to request: Tools without the code
// tools while they are withdrawn from it.
func (r *Registry) ToolsFor(request string) []Tool {
	all := r.Tools()
	if _, ok := r.withdrawn.get(request); !ok {
		return all
	}
	out := make([]Tool, 0, len(all))
	for _, t := range all {
		if !contextTools[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// refuseWithdrawn answers a call of a code tool from a request they are
// withdrawn from: the creation failure again, at once.
func (r *Registry) refuseWithdrawn(call Call) error {
	if !contextTools[call.Name] {
		return nil
	}
	wd, ok := r.withdrawn.get(call.Request)
	if !ok {
		return nil
	}
	return withdrawnError{tool: call.Name, until: wd.until, err: wd.err}
}

// noteCreateFailure withdraws the code tools from call's request when
// err is a creation failure.
func (r *Registry) noteCreateFailure(call Call, err error) {
	if call.Request == "" || r.cfg.CreateCooloff < 0 || !contextTools[call.Name] || !errors.Is(err, contexts.ErrCreateFailed) {
		return
	}
	r.withdrawn.add(call.Request, err, r.cooloff())
	r.log.Info("code tools withdrawn from a request after a sandbox creation failure", "request", call.Request,
		"for", r.cooloff().String())
}

func (r *Registry) cooloff() time.Duration {
	if r.cfg.CreateCooloff > 0 {
		return r.cfg.CreateCooloff
	}
	return DefaultCreateCooloff
}

// withdrawnError is a code tool's call refused after its request's
// creation failure: the failure's category and message, said again.
type withdrawnError struct {
	tool  string
	until time.Time
	err   error
}

func (e withdrawnError) Error() string {
	return fmt.Sprintf("%s: the code tools are withdrawn from this request until %s after its sandbox could not be created: %s",
		e.tool, e.until.UTC().Format(time.RFC3339), errdefs.Message(e.err.Error()))
}

func (e withdrawnError) Unwrap() error { return e.err }

// PublicMessage is what the caller reads (errdefs.PublicMessage): the
// withdrawal and until when, then the failure's own public sentence (a
// server fault's chain stays in the log).
func (e withdrawnError) PublicMessage() string {
	return fmt.Sprintf("%s: the code tools are withdrawn from this request until %s after its sandbox could not be created: %s",
		e.tool, e.until.UTC().Format(time.RFC3339), errdefs.PublicMessage(e.err))
}

// Cooloff is how long the code tools stay withdrawn from a request after
// a creation failure (Config.CreateCooloff; 0 when never).
func (r *Registry) Cooloff() time.Duration {
	if r.cfg.CreateCooloff < 0 {
		return 0
	}
	return r.cooloff()
}
