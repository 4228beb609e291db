package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/provider/local/localtest"
)

// TestChattyRow runs the chatty cell case at a small size on crun: one
// figure with its samples (each call's streamed text checked whole) and
// the events per call in its note.
func TestChattyRow(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "crun")
	p := localtest.New(t, local.Config{Runtime: "crun"})
	g, err := guard.New(guard.Config{}) // as sandlot bench runs it
	if err != nil {
		t.Fatal(err)
	}
	figs, err := chatty(context.Background(), Env{Provider: p, Guard: g}, Sizes{Warm: 10})
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
	if ids, _ := p.List(context.Background()); len(ids) != 0 {
		t.Errorf("sandboxes left running: %v", ids)
	}
}
