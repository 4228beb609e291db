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

// PublicMessage is the message an edge may show: the error text for a
// categorized error, a fixed string otherwise, so internals never leak.
func PublicMessage(err error) string {
	if err == nil {
		return ""
	}
	if Categorized(err) {
		return err.Error()
	}
	return "internal error"
}

// Message is an error text without the words of its category at the end
// (": invalid argument", ": unavailable"), which "%w" of a sentinel leaves
// there: what a person reads beside an exit status or HTTP code that
// already says the category. "not found" and "already exists" stay, since
// they are the predicate of messages like "context ID: not found", unless
// the text already says them.
func Message(text string) string {
	for {
		trimmed := text
		for _, c := range table {
			suffix := ": " + c.err.Error()
			rest, ok := strings.CutSuffix(trimmed, suffix)
			if !ok {
				continue
			}
			if (c.err == ErrNotFound || c.err == ErrAlreadyExists) && !strings.HasSuffix(rest, c.err.Error()) {
				continue
			}
			trimmed = rest
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
