// Package errdefs is sandlot's one error taxonomy.
//
// Every package wraps one of the sentinel categories below with context
// (fmt.Errorf("context %s: %w", id, errdefs.ErrNotFound)). The edges (HTTP,
// MCP, E2B, CLI exit codes) map a category to their own codes here, once, so
// that no handler invents its own mapping. An error that carries no category
// is an internal fault: the edge reports it without its text.
package errdefs

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Categories. Compare with errors.Is, never by text.
var (
	ErrNotFound           = errors.New("not found")
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrAlreadyExists      = errors.New("already exists")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrUnavailable        = errors.New("unavailable")
	ErrDeadlineExceeded   = errors.New("deadline exceeded")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrInternal           = errors.New("internal error")
)

// Code is the wire name of a category. The names match Connect/gRPC codes,
// so the E2B envd surface can use them unchanged.
type Code string

const (
	CodeNotFound           Code = "not_found"
	CodeInvalidArgument    Code = "invalid_argument"
	CodeAlreadyExists      Code = "already_exists"
	CodeFailedPrecondition Code = "failed_precondition"
	CodeResourceExhausted  Code = "resource_exhausted"
	CodeUnavailable        Code = "unavailable"
	CodeDeadlineExceeded   Code = "deadline_exceeded"
	CodePermissionDenied   Code = "permission_denied"
	CodeUnauthenticated    Code = "unauthenticated"
	CodeInternal           Code = "internal"
)

type category struct {
	err    error
	code   Code
	status int
	exit   int
}

// table is the single mapping from category to edge codes.
var table = []category{
	{ErrNotFound, CodeNotFound, 404, 3},
	{ErrInvalidArgument, CodeInvalidArgument, 400, 2},
	{ErrAlreadyExists, CodeAlreadyExists, 409, 4},
	{ErrFailedPrecondition, CodeFailedPrecondition, 412, 5},
	{ErrResourceExhausted, CodeResourceExhausted, 429, 6},
	{ErrUnavailable, CodeUnavailable, 503, 7},
	{ErrDeadlineExceeded, CodeDeadlineExceeded, 504, 8},
	{ErrPermissionDenied, CodePermissionDenied, 403, 9},
	{ErrUnauthenticated, CodeUnauthenticated, 401, 10},
}

func lookup(err error) (category, bool) {
	if err == nil {
		return category{}, false
	}
	for _, c := range table {
		if errors.Is(err, c.err) {
			return c, true
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return table[6], true
	}
	return category{}, false
}

// CodeOf returns the category code of err, or CodeInternal.
func CodeOf(err error) Code {
	if c, ok := lookup(err); ok {
		return c.code
	}
	return CodeInternal
}

// HTTPStatus returns the HTTP status for err: 4xx for client faults, 500 for
// anything uncategorised.
func HTTPStatus(err error) int {
	if c, ok := lookup(err); ok {
		return c.status
	}
	return 500
}

// ExitCode returns the CLI exit code for err (0 for nil, 1 for internal).
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	if c, ok := lookup(err); ok {
		return c.exit
	}
	return 1
}

// Categorized reports whether err belongs to one of the categories above,
// client fault or not. A categorized error's message was written for the
// caller and may be shown verbatim (PublicMessage); an uncategorized one is
// an internal fault.
func Categorized(err error) bool {
	_, ok := lookup(err)
	return ok
}

// IsClientFault reports whether err is the caller's fault: a category
// answered with a 4xx. unavailable (503) and deadline_exceeded (504) are
// categorized but not the caller's fault, so edges log them as server
// faults while still showing their message.
func IsClientFault(err error) bool {
	c, ok := lookup(err)
	return ok && c.status < 500
}

// Sentence returns an error of category cat (one of the sentinels above)
// whose text is the formatted sentence alone: unlike "%w" of a sentinel,
// it leaves no category words at its end, for messages that are a whole
// sentence ("tenant name \"acme\" is taken; choose another").
func Sentence(cat error, format string, a ...any) error {
	return &sentenceError{msg: fmt.Sprintf(format, a...), cat: cat}
}

type sentenceError struct {
	msg string
	cat error
}

func (e *sentenceError) Error() string { return e.msg }
func (e *sentenceError) Unwrap() error { return e.cat }

// Public attaches to err the sentence a caller reads instead of err's
// text: what happened and what to do, in words written for a person or a
// model ("The sandbox is still being prepared (the default template is
// being built); retry in a minute."). err keeps its category and its
// chain, which is what Error returns and what the edge logs. The
// outermost sentence wins. Public(nil, ...) is nil. An error type of its
// own says the same with a method PublicMessage() string.
func Public(err error, sentence string) error {
	if err == nil {
		return nil
	}
	return &publicError{err: err, sentence: sentence}
}

type publicError struct {
	err      error
	sentence string
}

func (e *publicError) Error() string { return e.err.Error() }
func (e *publicError) Unwrap() error { return e.err }

// PublicMessage is the sentence; PublicMessage(err) finds it.
func (e *publicError) PublicMessage() string { return e.sentence }

// explained is an error that carries the sentence a caller reads.
type explained interface{ PublicMessage() string }

// Explanation is the sentence err carries (Public, or an error type's
// PublicMessage method), if any: for code that rebuilds an error (to
// redact its text) and must keep the sentence.
func Explanation(err error) (string, bool) {
	var ex explained
	if errors.As(err, &ex) && ex.PublicMessage() != "" {
		return ex.PublicMessage(), true
	}
	return "", false
}

// The sentences of the categories whose errors are the server's: their
// text is a chain of internals ("context 1234: sandbox: agent: unexpected
// EOF"), which goes to the log, never to the caller.
const (
	unavailableSentence = "The server cannot do this right now; retry in a few seconds (if it keeps failing, the server log has the cause under this request's id)."
	deadlineSentence    = "The call did not finish in time; retry it, or give it a longer timeout."
	internalSentence    = "Internal error; retry, and if it keeps failing, the server log has the cause under this request's id."
)

// PublicMessage is the message an edge shows for err, one sentence that
// says what to do:
//   - the sentence of Public, when err (categorized) carries one;
//   - for a client fault (a 4xx category), err's text, written for the
//     caller, without the category words "%w" leaves in it (Message);
//   - for unavailable and deadline_exceeded without a sentence, a fixed
//     one: their text names internals;
//   - for anything uncategorised, the internal sentence, so internals
//     never leak.
//
// The edges (/v1, MCP, the E2B wire, the CLI) all show this, and log the
// whole chain beside the request id.
func PublicMessage(err error) string {
	if err == nil {
		return ""
	}
	c, ok := lookup(err)
	sentence, explainedErr := Explanation(err)
	switch {
	case !ok:
		return internalSentence
	case explainedErr:
		return sentence
	case c.status < 500:
		return Message(err.Error())
	case c.err == ErrDeadlineExceeded:
		return deadlineSentence
	default:
		return unavailableSentence
	}
}

// Message is an error text without the words of its category ("invalid
// argument", "unavailable"), which "%w" of a sentinel leaves at its end
// or, with "%w: %w", in its middle: what a person reads beside an exit
// status or HTTP code that already says the category. "not found" and
// "already exists" stay where they are the predicate of a message like
// "context ID: not found", unless the text already says them.
func Message(text string) string {
	for {
		trimmed := text
		for _, c := range table {
			word := c.err.Error()
			predicate := c.err == ErrNotFound || c.err == ErrAlreadyExists
			if rest, ok := strings.CutSuffix(trimmed, ": "+word); ok && (!predicate || strings.HasSuffix(rest, word)) {
				trimmed = rest
			}
			if rest, ok := strings.CutPrefix(trimmed, word+": "); ok && !predicate {
				trimmed = rest
			}
			if !predicate {
				trimmed = strings.ReplaceAll(trimmed, ": "+word+": ", ": ")
			}
		}
		if trimmed == text {
			return text
		}
		text = trimmed
	}
}

// FromCode returns the sentinel for a wire code (for clients decoding errors).
func FromCode(code Code) error {
	for _, c := range table {
		if c.code == code {
			return c.err
		}
	}
	return ErrInternal
}
