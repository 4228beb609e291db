package errdefs_test

import (
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/errdefs/errdefstest"
)

// TestCases: the shared table every edge's test walks agrees with the
// mapping here (code, status, exit) and PublicMessage's sentences.
func TestCases(t *testing.T) {
	for _, c := range errdefstest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if got := errdefs.CodeOf(c.Err); got != c.Code {
				t.Errorf("code %q, want %q", got, c.Code)
			}
			if got := errdefs.HTTPStatus(c.Err); got != c.Status {
				t.Errorf("status %d, want %d", got, c.Status)
			}
			if got := errdefs.ExitCode(c.Err); got != c.Exit {
				t.Errorf("exit %d, want %d", got, c.Exit)
			}
			if got := !errdefs.IsClientFault(c.Err); got != c.ServerFault {
				t.Errorf("server fault %v, want %v", got, c.ServerFault)
			}
			errdefstest.Check(t, "errdefs", c, errdefs.PublicMessage(c.Err))
		})
	}
}
