package contexts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

type redactGuard struct{ Guard }

func (redactGuard) Text(_ context.Context, _, s string) string {
	return strings.ReplaceAll(s, "sk-SECRET", "[REDACTED]")
}

// TestGuardErrorKeepsRetry: an error the guard redacts keeps its category
// and the time it asks callers to wait (errdefs.Retry: a template being
// built), so the edge still answers 503 with Retry-After and logs a state,
// not a fault. Before, the redacted copy dropped it.
func TestGuardErrorKeepsRetry(t *testing.T) {
	err := errdefs.Retry(fmt.Errorf("template being built near sk-SECRET: %w", errdefs.ErrUnavailable), 10*time.Second)
	got := guardError(context.Background(), redactGuard{}, "t", err)
	if strings.Contains(got.Error(), "sk-SECRET") || !errors.Is(got, errdefs.ErrUnavailable) {
		t.Errorf("guarded %v", got)
	}
	if d, ok := errdefs.RetryAfter(got); !ok || d != 10*time.Second {
		t.Errorf("retry after %v %v, want 10s", d, ok)
	}
	if _, ok := errdefs.RetryAfter(guardError(context.Background(), redactGuard{}, "t", fmt.Errorf("down: %w", errdefs.ErrUnavailable))); ok {
		t.Error("a plain error gained a retry time")
	}
}
