// Package errdefstest is the one table of error categories every edge's
// test walks: an error of each category as the daemon makes it (a chain
// with a context id, a runtime sandbox id, an agent method and a Go
// error's text in it) and what every edge must show for it: its status,
// its exit code and one public sentence, with none of the chain's
// internals (Leaks).
package errdefstest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

// Case is one category as an edge meets it.
type Case struct {
	Name string
	// Err is the error the edge is handed.
	Err     error
	Code    errdefs.Code
	Status  int // HTTP status (/v1, MCP's HTTP answers, the E2B wire)
	Exit    int // the CLI's exit status
	Message string
	// ServerFault: a 5xx, whose answer names the request id.
	ServerFault bool
}

// Internals every Err below carries in its chain, which no public message
// may show.
const (
	contextID = "4b1e0c3a-1f2e-4d5c-8b9a-0123456789ab"
	sandboxID = "sb-0123abcd4567"
)

// Cases are the categories, each with the internal chain the daemon's
// errors carry, plus one that carries its own sentence (errdefs.Public)
// and one uncategorised fault.
func Cases() []Case {
	chain := func(text string, cat error) error {
		return fmt.Errorf("context %s: sandbox %s: kernel.run: %s: %w", contextID, sandboxID, text, cat)
	}
	return []Case{
		{"not_found", fmt.Errorf("template nope not found: %w", errdefs.ErrNotFound),
			errdefs.CodeNotFound, 404, 3, "template nope not found", false},
		{"invalid_argument", fmt.Errorf("run_code: unknown field %q (allowed: code, language, timeout): %w", "lang", errdefs.ErrInvalidArgument),
			errdefs.CodeInvalidArgument, 400, 2, `run_code: unknown field "lang" (allowed: code, language, timeout)`, false},
		{"already_exists", errdefs.Sentence(errdefs.ErrAlreadyExists, "tenant name %q is taken; choose another", "acme"),
			errdefs.CodeAlreadyExists, 409, 4, `tenant name "acme" is taken; choose another`, false},
		{"failed_precondition", errdefs.Public(chain("no r kernel", errdefs.ErrFailedPrecondition), "no r kernel: R is not installed in this sandbox"),
			errdefs.CodeFailedPrecondition, 412, 5, "no r kernel: R is not installed in this sandbox", false},
		{"resource_exhausted", fmt.Errorf("conversation c has 5 active contexts (limit 5); terminate one or wait for expiry: %w", errdefs.ErrResourceExhausted),
			errdefs.CodeResourceExhausted, 429, 6, "conversation c has 5 active contexts (limit 5); terminate one or wait for expiry", false},
		{"permission_denied", fmt.Errorf("only an admin tenant may set the guard mode: %w", errdefs.ErrPermissionDenied),
			errdefs.CodePermissionDenied, 403, 9, "only an admin tenant may set the guard mode", false},
		{"unauthenticated", fmt.Errorf("invalid API key: %w", errdefs.ErrUnauthenticated),
			errdefs.CodeUnauthenticated, 401, 10, "invalid API key", false},
		{"unavailable", chain("agent: unexpected EOF", errdefs.ErrUnavailable),
			errdefs.CodeUnavailable, 503, 7, "The server cannot do this right now; retry in a few seconds (if it keeps failing, the server log has the cause under this request's id).", true},
		{"unavailable with a sentence", errdefs.Public(chain("image build: debootstrap", errdefs.ErrUnavailable),
			"The sandbox is still being prepared (the default template is being built); retry in a minute."),
			errdefs.CodeUnavailable, 503, 7, "The sandbox is still being prepared (the default template is being built); retry in a minute.", true},
		{"deadline_exceeded", chain("wait", context.DeadlineExceeded),
			errdefs.CodeDeadlineExceeded, 504, 8, "The call did not finish in time; retry it, or give it a longer timeout.", true},
		{"internal", fmt.Errorf("context %s: open /run/sandlot/%s/agent.sock: unexpected EOF", contextID, sandboxID),
			errdefs.CodeInternal, 500, 1, "Internal error; retry, and if it keeps failing, the server log has the cause under this request's id.", true},
	}
}

// Leaks are what the chains above hold and no edge may show.
var Leaks = []string{contextID, sandboxID, "kernel.run", "unexpected EOF", "/run/sandlot", "[internal]",
	": unavailable", ": invalid argument", ": not found: ", ": failed precondition", ": deadline exceeded", "context deadline exceeded",
	"json:", "Go struct"}

// Check fails t when msg, what edge showed for c, is not c's sentence or
// holds an internal.
func Check(t testing.TB, edge string, c Case, msg string) {
	t.Helper()
	if msg != c.Message {
		t.Errorf("%s, %s: message %q, want %q", edge, c.Name, msg, c.Message)
	}
	for _, l := range Leaks {
		if strings.Contains(msg, l) {
			t.Errorf("%s, %s: message %q shows %q", edge, c.Name, msg, l)
		}
	}
}
