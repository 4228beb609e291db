package contexts

import "errors"

// Failure is a call failure that a model calling a tool can read and act
// on, rather than a fault of the request: the tenant's or conversation's
// context limit (resource_exhausted), and a sandbox lost under the call
// (unavailable: the next call gets a fresh one). The tools answer these as
// results with success false and the failure named in their error, so an
// LLM sees why and what to do instead of a bare HTTP error; the error keeps
// its category for every other caller (errors.Is).
type Failure struct {
	Kind string // FailureLimit or FailureLost
	// StateLost says the context ended with its sandbox (FailureLost):
	// the next call starts in a fresh one, without the earlier state.
	StateLost bool
	Err       error
}

// Failure kinds, the error name a tool result shows.
const (
	FailureLimit = "ContextLimitExceeded"
	FailureLost  = "SandboxLost"
)

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// AsFailure returns the Failure in err's chain, if any.
func AsFailure(err error) (*Failure, bool) {
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}

// ErrCreateFailed marks (errors.Is) a call that failed because its
// context's sandbox could not be created: the provider failed or timed
// out. A limit, an unknown template or a caller that went away is not
// one. The error keeps its category (unavailable, most often) and
// message; the tools withdraw the code tools of the caller's request for
// a while after one (000 §8.5, docs/tools.md).
var ErrCreateFailed = errors.New("sandbox creation failed")

// createFailed wraps a creation failure: its message and chain are the
// cause's, and it is ErrCreateFailed.
type createFailed struct{ err error }

func (c createFailed) Error() string        { return c.err.Error() }
func (c createFailed) Unwrap() error        { return c.err }
func (c createFailed) Is(target error) bool { return target == ErrCreateFailed }
