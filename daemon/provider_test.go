package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store/memory"
)

// TestBadE2BSettingsRefused: e2b provider settings that do not parse stop
// New with an invalid_argument naming the setting. Before, the daemon
// went on without a provider and crashed on a nil pointer in the
// manager's reconcile (`sandlot serve --providers e2b --e2b-sizes x`).
func TestBadE2BSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    E2BProvider
		want string
	}{
		{"sizes", E2BProvider{Sizes: "nonsense"}, "--e2b-sizes"},
		{"connect timeout", E2BProvider{ConnectTimeout: -time.Second}, "--e2b-connect-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d, err := New(ctx, Config{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "run"),
				Providers: []string{"e2b"}, E2BProvider: tc.f}, memory.New())
			if err == nil {
				d.Close(ctx)
				t.Fatal("New accepted them")
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want invalid_argument naming %s", err, tc.want)
			}
		})
	}
}
