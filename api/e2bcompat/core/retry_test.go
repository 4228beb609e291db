package core

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

// TestErrorsCarryRetryAfter: on the E2B wire too, an error that says when
// to come back (a template being built) is a 503 with Retry-After, on the
// control plane and on Connect; a plain unavailable has none.
func TestErrorsCarryRetryAfter(t *testing.T) {
	building := errdefs.Retry(fmt.Errorf("the default template is being built: %w", errdefs.ErrUnavailable), 10*time.Second)
	for _, tc := range []struct {
		name, path string
		err        error
		want       string
	}{
		{"control plane", "/sandboxes", building, "10"},
		{"connect", "/process.Process/Start", building, "10"},
		{"plain unavailable", "/sandboxes", fmt.Errorf("down: %w", errdefs.ErrUnavailable), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			WriteError(w, httptest.NewRequest("POST", tc.path, nil), tc.err)
			if w.Code != 503 || w.Header().Get("Retry-After") != tc.want {
				t.Errorf("%d Retry-After %q, want 503 %q", w.Code, w.Header().Get("Retry-After"), tc.want)
			}
		})
	}
}
