package desktop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
)

// TestBuilderFirstUse: asking for the desktop template starts its build
// and answers unavailable with the phase; a failed build is
// failed_precondition with its reason; other templates are not its
// business.
func TestBuilderFirstUse(t *testing.T) {
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := desktop.ImageConfig()
	cfg.Mmdebstrap = "/nonexistent/mmdebstrap"
	b := desktop.NewBuilderWith(context.Background(), s, nil, cfg)
	if err := b.Missing("default"); err != nil {
		t.Errorf("another template: %v", err)
	}
	err = b.Missing(desktop.Template)
	if !errors.Is(err, errdefs.ErrUnavailable) && !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("first use: %v, want unavailable (building) or the failure", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if !b.Status().Building {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the build did not end")
		}
	}
	err = b.Missing(desktop.Template)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "mmdebstrap") {
		t.Errorf("after a failed build: %v, want failed_precondition naming mmdebstrap", err)
	}
}
