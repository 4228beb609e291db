package daemon

import (
	"errors"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

// TestBaseBuildMissing: while the default template is built, creating
// from it is unavailable (with the phase), after a failed build
// failed_precondition, once built or for another template nothing.
func TestBaseBuildMissing(t *testing.T) {
	tests := []struct {
		name     string
		b        *baseBuild
		template string
		want     error
	}{
		{"building", &baseBuild{phase: "3/8 installing"}, "default", errdefs.ErrUnavailable},
		{"building, empty name", &baseBuild{phase: "1/8 x"}, "", errdefs.ErrUnavailable},
		{"failed", &baseBuild{err: errors.New("no mirror")}, "default", errdefs.ErrFailedPrecondition},
		{"built", &baseBuild{done: true}, "default", nil},
		{"other template", &baseBuild{phase: "1/8 x"}, "mine", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.missing(tc.template)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("missing = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("missing = %v, want %v", err, tc.want)
			}
		})
	}
}
