package daemon

import (
	"slices"
	"testing"

	"github.com/sandlot/sandlot/internal/deptest"
)

// TestComposedOnTop: the daemon is the composition root, so imports point
// down at it from its callers only: cli (serve, mcp, the bench command)
// and bench may import daemon, and only cmd/sandlot imports cli. A
// package below that reached up into either would tie a piece of the
// daemon to the whole of it.
func TestComposedOnTop(t *testing.T) {
	for _, tc := range []struct {
		pkg     string
		allowed []string
	}{
		{"daemon", []string{"bench", "cli"}},
		{"cli", []string{"cmd/sandlot"}},
	} {
		for _, imp := range deptest.Importers(t, tc.pkg) {
			if !slices.Contains(tc.allowed, imp) {
				t.Errorf("%s imports %s; only %v may", imp, tc.pkg, tc.allowed)
			}
		}
	}
}
