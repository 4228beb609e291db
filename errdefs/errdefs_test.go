package errdefs

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestCategories(t *testing.T) {
	tests := []struct {
		err                      error
		code                     Code
		status, exit             int
		categorized, clientFault bool
		public                   string
	}{
		{fmt.Errorf("ctx x: %w", ErrNotFound), CodeNotFound, 404, 3, true, true, "ctx x: not found"},
		{fmt.Errorf("bad: %w", ErrInvalidArgument), CodeInvalidArgument, 400, 2, true, true, "bad"},
		{fmt.Errorf("tenant acme: %w", ErrAlreadyExists), CodeAlreadyExists, 409, 4, true, true, "tenant acme: already exists"},
		{fmt.Errorf("context c/main runs on template x: %w", ErrFailedPrecondition), CodeFailedPrecondition, 412, 5, true, true, "context c/main runs on template x"},
		{fmt.Errorf("10 active contexts (limit 10): %w", ErrResourceExhausted), CodeResourceExhausted, 429, 6, true, true, "10 active contexts (limit 10)"},
		{fmt.Errorf("not your template: %w", ErrPermissionDenied), CodePermissionDenied, 403, 9, true, true, "not your template"},
		{fmt.Errorf("invalid API key: %w", ErrUnauthenticated), CodeUnauthenticated, 401, 10, true, true, "invalid API key"},
		// 5xx categories: a server fault, its chain replaced by a sentence
		// unless the error carries one (Public).
		{fmt.Errorf("context 1234: sandbox: agent: unexpected EOF: %w", ErrUnavailable), CodeUnavailable, 503, 7, true, false, unavailableSentence},
		{Public(fmt.Errorf("build: phase debootstrap: %w", ErrUnavailable), "The default template is being built; retry in a minute."), CodeUnavailable, 503, 7, true, false, "The default template is being built; retry in a minute."},
		{ErrDeadlineExceeded, CodeDeadlineExceeded, 504, 8, true, false, deadlineSentence},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), CodeDeadlineExceeded, 504, 8, true, false, deadlineSentence},
		// Uncategorized: hidden, whatever sentence it carries.
		{errors.New("open /var/lib/x: permission denied"), CodeInternal, 500, 1, false, false, internalSentence},
		{ErrInternal, CodeInternal, 500, 1, false, false, internalSentence},
		// A sentence on a client fault replaces its text too.
		{fmt.Errorf("run_code: %w", Public(fmt.Errorf("sandbox sb-1: kernel.run: no r kernel: %w", ErrFailedPrecondition), "no r kernel: R is not installed in this sandbox")),
			CodeFailedPrecondition, 412, 5, true, true, "no r kernel: R is not installed in this sandbox"},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			if got := CodeOf(tc.err); got != tc.code {
				t.Errorf("CodeOf = %q, want %q", got, tc.code)
			}
			if got := HTTPStatus(tc.err); got != tc.status {
				t.Errorf("HTTPStatus = %d, want %d", got, tc.status)
			}
			if got := ExitCode(tc.err); got != tc.exit {
				t.Errorf("ExitCode = %d, want %d", got, tc.exit)
			}
			if got := Categorized(tc.err); got != tc.categorized {
				t.Errorf("Categorized = %v, want %v", got, tc.categorized)
			}
			if got := IsClientFault(tc.err); got != tc.clientFault {
				t.Errorf("IsClientFault = %v, want %v", got, tc.clientFault)
			}
			if got := PublicMessage(tc.err); got != tc.public {
				t.Errorf("PublicMessage = %q, want %q", got, tc.public)
			}
		})
	}
	if Categorized(nil) || IsClientFault(nil) || PublicMessage(nil) != "" || ExitCode(nil) != 0 {
		t.Error("nil must be no category, exit 0, no message")
	}
}

// TestFromCodeRoundTrip: every code maps back to its sentinel, so a client
// decoding {code, message} gets errors.Is working.
func TestFromCodeRoundTrip(t *testing.T) {
	for _, c := range table {
		if got := FromCode(c.code); got != c.err {
			t.Errorf("FromCode(%q) = %v, want %v", c.code, got, c.err)
		}
	}
	if FromCode("nonsense") != ErrInternal {
		t.Error("an unknown code must map to ErrInternal")
	}
}

func TestMessage(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{fmt.Errorf("run: --timeout must be between 1s and 600s: %w", ErrInvalidArgument).Error(), "run: --timeout must be between 1s and 600s"},
		{fmt.Errorf("POST /v1/x: %w: %w", errors.New("dial tcp: refused"), ErrUnavailable).Error(), "POST /v1/x: dial tcp: refused"},
		{fmt.Errorf("context abc: %w", ErrNotFound).Error(), "context abc: not found"},
		{fmt.Errorf("template x not found: %w", ErrNotFound).Error(), "template x not found"},
		{fmt.Errorf("tenant acme: %w", ErrAlreadyExists).Error(), "tenant acme: already exists"},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", ErrFailedPrecondition)).Error(), "a: b"},
		{fmt.Errorf("postgres: %w: %w", ErrUnavailable, errors.New("dial tcp: refused")).Error(), "postgres: dial tcp: refused"},
		{fmt.Errorf("%w: %w", ErrInvalidArgument, errors.New("bad name")).Error(), "bad name"},
		{fmt.Errorf("a: %w: b", ErrNotFound).Error(), "a: not found: b"},
		{"plain", "plain"},
	} {
		if got := Message(tc.err); got != tc.want {
			t.Errorf("Message(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
