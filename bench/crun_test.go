package bench

import (
	"context"
	"testing"

	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/provider/local/localtest"
)

// crunEnv is the Env a bench case runs in under test: a local provider on
// crun and the guard as `sandlot bench` runs it. It needs root and crun,
// and fails the test if a sandbox is left running at its end.
func crunEnv(t *testing.T) Env {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "crun")
	p := localtest.New(t, local.Config{Runtime: "crun"})
	// Registered after localtest's cleanup, so it runs before it.
	t.Cleanup(func() {
		if ids, _ := p.List(context.Background()); len(ids) != 0 {
			t.Errorf("sandboxes left running: %v", ids)
		}
	})
	g, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return Env{Provider: p, Guard: g}
}
