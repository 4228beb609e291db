// Package localtest starts local providers for other packages' tests: a
// private state dir, the tests' agent binary, and a cleanup that destroys
// whatever sandboxes are left and purges the state dir.
package localtest

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/runtime/oci"
)

// New returns a local provider of cfg on its runtime (which the test
// requires, with root). StateDir, AgentPath and, when unset, Logger are
// the test's. Cleanups run last in, first out: one registered after New
// (a manager's Close) runs before the provider's.
func New(t testing.TB, cfg local.Config) *local.Provider {
	t.Helper()
	testenv.RequireRoot(t)
	if cfg.Runtime != "" && cfg.Runtime != "auto" {
		testenv.RequireBinary(t, cfg.Runtime)
	}
	dir, err := os.MkdirTemp("", "sl-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir, cfg.AgentPath = dir, testenv.AgentBinary(t)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := local.New(cfg)
	if err != nil {
		oci.Purge(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := p.List(context.Background())
		for _, id := range ids {
			if err := p.Destroy(context.Background(), id); err != nil {
				t.Errorf("destroy %s: %v", id, err)
			}
		}
		if err := oci.Purge(dir); err != nil {
			t.Errorf("purge state dir: %v", err)
		}
	})
	return p
}
