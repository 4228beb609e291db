package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// warmParts splits the warm python row by what each call crosses, on the
// same warm context and each taken in turn with the floor's REPL: the
// daemon's round trip to the agent alone (a ping: no kernel), and run_code
// on the sandbox the manager hands a call (its guard still reads the
// result) without the manager's own work (keyed lock, TTL, record,
// metrics). The warm row minus the second is the manager's share; the
// second minus the first is the agent's hop to the kernel, python's own
// work and the guard.
func warmParts(ctx context.Context, m *contexts.Manager, sz Sizes) ([]Figure, error) {
	var out []Figure
	err := m.Use(ctx, ident("warm-python"), contexts.CreateOptions{}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
		parts := []struct {
			name string
			call func(ctx context.Context) error
		}{
			{"warm part: daemon to agent and back (ping, no kernel), Go API", sb.Ping},
			{"warm part: run_code python (1+1) on the sandbox, guarded, no manager, Go API", func(ctx context.Context) error {
				res, err := sb.RunCode(ctx, agent.RunCodeParams{Language: "python", Code: "1+1"}, nil)
				if err != nil {
					return err
				}
				return checkRun(res, "2")
			}},
		}
		for _, p := range parts {
			samples, floor, err := TimePaired(ctx, 50, sz.Warm, p.call)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			f := Latency(p.name, samples)
			f.Note = inTurnNote(f, floor)
			out = append(out, f)
		}
		return nil
	})
	return out, err
}

// checkRun is check for a sandbox's own result.
func checkRun(res *agent.RunCodeResult, want string) error {
	if !res.Success {
		return fmt.Errorf("execution failed: %+v", res.Error)
	}
	for _, r := range res.Results {
		if r.Main && r.Text == want {
			return nil
		}
	}
	return fmt.Errorf("no main result %q in %+v", want, res.Results)
}

// inTurnNote says a figure's p50 against the floor taken in turn with it
// (TimePaired's floor samples).
func inTurnNote(f Figure, floor []time.Duration) string {
	pf := Latency("", floor).P50
	return fmt.Sprintf("taken in turn with the floor's REPL: its p50 then %.3f ms, this p50 %.2fx that", pf, f.P50/pf)
}
