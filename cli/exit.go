package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/errdefs"
)

// Main runs args and returns the process's exit status. A failed command
// prints "error: MESSAGE" on errw, the message without the category words
// the error carries for the exit code, and a hint when no server answered.
// Code that ran and failed (exec, run) exits with its own status, after
// its output said why.
//
// With -o json or yaml (or --json) the error is one JSON object on errw
// instead: {"code", "message", "exitCode"} and, when the server named it,
// "requestId", so a script or a model reads it as it reads the output.
func Main(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) int {
	cmd, err := runTree(ctx, args, in, out, errw)
	var ce *codeExit
	if err == nil || errors.As(err, &ce) {
		return exitStatus(err)
	}
	msg := errorMessage(err)
	var ue *usageError
	hint := ""
	if errors.As(err, &ue) {
		hint = "See '" + ue.path + " --help'."
	}
	if noServer(err) {
		hint = "hint: no sandlot server answers; is `sandlot serve` running? Set SANDLOT_URL (or --url), or add a context (sandlot config add-context)."
	}
	var ae *api.Error
	reqID := ""
	if errors.As(err, &ae) {
		reqID = ae.RequestID
	}
	if structuredCmd(cmd) || structuredArgs(args) {
		v := jsonError{Code: errdefs.CodeOf(err), Message: msg, Hint: hint, RequestID: reqID, ExitCode: exitStatus(err)}
		if b, merr := json.Marshal(v); merr == nil {
			fmt.Fprintln(errw, string(b))
			return exitStatus(err)
		}
	}
	if reqID != "" {
		msg += " (request id " + reqID + ")"
	}
	if hint != "" {
		msg += "\n" + hint
	}
	fmt.Fprintln(errw, "error: "+msg)
	return exitStatus(err)
}

// jsonError is an error as the CLI prints it in json and yaml modes.
type jsonError struct {
	Code      errdefs.Code `json:"code"`
	Message   string       `json:"message"`
	Hint      string       `json:"hint,omitempty"`
	RequestID string       `json:"requestId,omitempty"`
	ExitCode  int          `json:"exitCode"`
}

// exitStatus is the exit status of a command that returned err: the
// code's own for codeExit, else its category's (errdefs.ExitCode).
func exitStatus(err error) int {
	var ce *codeExit
	if errors.As(err, &ce) {
		return ce.status
	}
	return errdefs.ExitCode(err)
}

// errorMessage is err's text for a person: a server's answer without its
// wire code in front, and no category word (": not found", ": invalid
// argument") at the end, which only chose the exit status.
func errorMessage(err error) string {
	s := err.Error()
	var ae *api.Error
	if errors.As(err, &ae) {
		s = strings.Replace(s, string(ae.Code)+": "+ae.Message, ae.Message, 1)
	}
	return errdefs.Message(s)
}

// noServer reports whether err is a failure to reach the server at all.
func noServer(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// codeExit is the failure of the caller's code in a sandbox: the command
// exits with status (the code's own exit status, or 1 when it raised)
// and prints no error line, as a shell does.
type codeExit struct {
	status int
	err    error
}

func (e *codeExit) Error() string { return e.err.Error() }
func (e *codeExit) Unwrap() error { return e.err }

// exitedWith is the error of code that exited with status n (nonzero),
// or raised (n 0): status n where a process can exit with it, else 1.
func exitedWith(n int, err error) error {
	if n <= 0 || n > 255 {
		n = 1
	}
	return &codeExit{status: n, err: err}
}
