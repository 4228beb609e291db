package chain

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/provider/e2b"
)

// TestFallbackIsLogged: a fallback (here: no E2B key) is logged as a
// warning naming the provider, the next one and the reason, besides being
// counted by OnFallback.
func TestFallbackIsLogged(t *testing.T) {
	var logs bytes.Buffer
	var fb fallbacks
	c := New([]contexts.Provider{e2b.New(e2b.Config{}), &fakeProvider{name: "local"}},
		Config{OnFallback: fb.count, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, err := c.Create(context.Background(), contexts.Spec{}); err != nil {
		t.Fatal(err)
	}
	want := `level=WARN msg="provider unavailable, falling back" provider=e2b next=local error="E2B API key not configured"`
	if !strings.Contains(logs.String(), want) {
		t.Fatalf("log lacks %s:\n%s", want, logs.String())
	}
	if len(fb.got) != 1 {
		t.Fatalf("fallbacks counted %v", fb.got)
	}
}
