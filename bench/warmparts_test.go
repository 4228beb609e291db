package bench

import (
	"context"
	"strings"
	"testing"
)

// TestWarmRows runs the warm Go API case at a small size on crun: every
// language's row and both parts of the python row have their samples, and
// the rows judged or read against the floor say the floor taken in turn.
func TestWarmRows(t *testing.T) {
	env := crunEnv(t)
	figs, err := warmAPI(context.Background(), env, Sizes{Warm: 20})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"warm run_code python (1+1), Go API", "warm run_code javascript (1+1), Go API", "warm run_code bash (echo 2), Go API",
		"warm part: daemon to agent and back (ping, no kernel), Go API",
		"warm part: run_code python (1+1) on the sandbox, guarded, no manager, Go API",
	}
	if len(figs) != len(want) {
		t.Fatalf("%d figures, want %d: %+v", len(figs), len(want), figs)
	}
	for i, f := range figs {
		t.Logf("%s: p50 %.3f ms %s", f.Name, f.P50, f.Note)
		if f.Name != want[i] || f.N != 20 || f.P50 <= 0 {
			t.Errorf("figure %d: %+v, want %q with 20 samples", i, f, want[i])
		}
		inTurn := strings.HasPrefix(f.Note, "taken in turn with the floor's REPL")
		if judged := i == 0 || i >= 3; judged != inTurn {
			t.Errorf("%s: note %q", f.Name, f.Note)
		}
	}
}
