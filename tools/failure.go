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
}

// lostMessage is what a model reads when the sandbox died under its call;
// the transport error behind it names host internals and stays in the log.
const lostMessage = "the sandbox was lost during this call (it crashed, was killed or ran out of memory); " +
	"the next call starts a fresh sandbox without this one's variables and files"

// failure converts a contexts.Failure into the tool's result with success
// false, so an LLM reads why the call failed and what to do (the specs'
// "readable error results"); any other error is returned as is.
func failure(tool string, err error) (any, error) {
	f, ok := contexts.AsFailure(err)
	if !ok {
		return nil, err
	}
	msg := errdefs.Message(f.Err.Error())
	if f.Kind == contexts.FailureLost {
		msg = lostMessage
	}
	e := api.ExecError{Name: f.Kind, Value: msg}
	switch tool {
	case "run_code":
		return &RunCodeResult{Success: false, ExitCode: -1, Error: &e, Results: []api.RichResult{}, OutputType: OutputText}, nil
	case "run_analysis":
		return &AnalysisResult{Success: false, ExitCode: -1, Error: &e}, nil
	case "bash":
		return &BashResult{Success: false, ExitCode: -1, Error: &e, OutputType: OutputText}, nil
	}
	return &FailureResult{Success: false, Error: e, Retryable: true}, nil
}

// lost marks an error of sb (a guarded sandbox) that says the connection
// to it failed: the sandbox is gone under the call.
func lost(err error) error {
	if err != nil && errors.Is(err, errdefs.ErrUnavailable) {
		if _, ok := contexts.AsFailure(err); !ok {
			return &contexts.Failure{Kind: contexts.FailureLost, Err: fmt.Errorf("sandbox lost: %w", err)}
		}
	}
	return err
}
