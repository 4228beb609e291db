package bench

import (
	"context"
	"strings"
	"testing"
)

// TestChattyRow runs the chatty cell case at a small size on crun: one
// figure with its samples (each call's streamed text checked whole) and
// the events per call in its note.
func TestChattyRow(t *testing.T) {
	env := crunEnv(t)
	figs, err := chatty(context.Background(), env, Sizes{Warm: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 1 {
		t.Fatalf("%d figures, want 1: %+v", len(figs), figs)
	}
	f := figs[0]
	t.Logf("%s: p50 %.3f ms %s", f.Name, f.P50, f.Note)
	if f.Name != "warm run_code python (1000 prints, streamed), Go API" || f.N != 20 || f.P50 <= 0 || !strings.HasPrefix(f.Note, "stdout events per call: p50 ") {
		t.Errorf("figure %+v", f)
	}
}
