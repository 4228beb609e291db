package tools

import (
	"errors"
	"fmt"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// FailureResult is the result of a tool other than the code tools when
// the call met a contexts.Failure (a context limit, a lost sandbox):
// success false and the failure named, as the code tools' results show it.
type FailureResult struct {
	api.PathRef
	Success bool          `json:"success"`
	Error   api.ExecError `json:"error"`
	// Retryable says the same call may succeed later (a fresh sandbox, a
	// context ended or expired).
	Retryable bool `json:"retryable"`
	// StateLost: the sandbox was lost under this call; the next call
	// starts in a fresh one (api.RunCodeResult.StateLost).
	StateLost bool `json:"stateLost,omitempty"`
}

// lostMessage is what a model reads when the sandbox died under its call;
// the transport error behind it names host internals and stays in the log.
// The call is not run again: its code may have had effects already.
const lostMessage = "the sandbox was lost during this call (it crashed, was killed or ran out of memory); " +
	"this call's code was not run again; the next call starts a fresh sandbox without this one's variables, " +
	"files and installed packages"

// transitMessage is what a model reads when the connection to a sandbox
// that still answers failed during the call: its state is kept.
const transitMessage = "the connection to the sandbox failed during this call, which may or may not have run; " +
	"the sandbox still answers and keeps its state"

// failure converts a contexts.Failure into the tool's result with success
// false, so an LLM reads why the call failed and what to do (the specs'
// "readable error results"); any other error is returned as is.
func failure(tool string, err error) (any, error) {
	f, ok := contexts.AsFailure(err)
	if !ok {
		return nil, err
	}
	msg := errdefs.Message(f.Err.Error())
	switch {
	case f.Kind == contexts.FailureLost && f.StateLost:
		msg = lostMessage
	case f.Kind == contexts.FailureLost:
		msg = transitMessage
	}
	e := api.ExecError{Name: f.Kind, Value: msg}
	switch tool {
	case "run_code":
		return &RunCodeResult{Success: false, ExitCode: -1, Error: &e, Results: []api.RichResult{}, OutputType: OutputError,
			StateLost: f.StateLost}, nil
	case "run_analysis":
		return &AnalysisResult{Success: false, ExitCode: -1, Error: &e, OutputType: OutputError, StateLost: f.StateLost}, nil
	case "bash":
		return &BashResult{Success: false, ExitCode: -1, Error: &e, OutputType: OutputError, StateLost: f.StateLost}, nil
	}
	return &FailureResult{Success: false, Error: e, Retryable: true, StateLost: f.StateLost}, nil
}

// lost marks an error of a Use that says the connection to the sandbox
// failed, when the manager did not find the sandbox dead (then it is a
// Failure with StateLost already): the call failed in transit.
func lost(err error) error {
	if err != nil && errors.Is(err, errdefs.ErrUnavailable) {
		if _, ok := contexts.AsFailure(err); !ok {
			return &contexts.Failure{Kind: contexts.FailureLost, Err: fmt.Errorf("sandbox lost: %w", err)}
		}
	}
	return err
}
