package tools

import (
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
)

// TestCodeResultStateFlags: what the manager says about the context's
// state reaches run_code's result: Woken (kernels fresh, with a notice)
// and Restored (memory kept, nothing to warn about).
func TestCodeResultStateFlags(t *testing.T) {
	r := New(newFake(t), Config{})
	for _, tc := range []struct {
		name            string
		in              contexts.ExecuteResult
		woken, restored bool
		notice          bool
	}{
		{"plain", contexts.ExecuteResult{}, false, false, false},
		{"woken", contexts.ExecuteResult{Woken: true}, true, false, true},
		{"restored", contexts.ExecuteResult{Restored: true}, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.RunCodeResult = agent.RunCodeResult{Success: true}
			out := r.codeResult(&tc.in)
			if out.Woken != tc.woken || out.Restored != tc.restored || (out.Notice != "") != tc.notice {
				t.Fatalf("result %+v: woken %v restored %v notice %q; want %v %v notice %v", tc.in, out.Woken, out.Restored, out.Notice, tc.woken, tc.restored, tc.notice)
			}
		})
	}
}
