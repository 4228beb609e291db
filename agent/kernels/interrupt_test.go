package kernels

import (
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
)

// TestInterruptBeforeCellRuns: a run whose timeout passes while its cell
// is still read and compiled (a long cell, a short timeout) is
// interrupted once its code starts, and the kernel keeps its state. The
// driver used to drop a signal that came before the code ran: the cell
// ran on, and the agent killed the kernel after the grace, its state gone.
func TestInterruptBeforeCellRuns(t *testing.T) {
	m := needs(t, agent.Python)
	runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "kept = 5"})
	// Parsing and compiling this takes far longer than its timeout (about
	// 0.45 s on a loaded 2-core VM against 30 ms) and well below the
	// interrupt's 2 s grace; its last line would run for 30 s.
	long := strings.Repeat("x = 1\n", 25_000) + "import time\ntime.sleep(30)\n"
	r := runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: long, TimeoutMs: 30})
	if !r.TimedOut || r.Error == nil || r.Error.Name != "TimeoutError" {
		t.Fatalf("the long cell: timed out %v, error %+v", r.TimedOut, r.Error)
	}
	if r.KernelRestarted {
		t.Fatalf("the interrupt was lost and the kernel killed: %+v (%d ms)", r.Error, r.DurationMs)
	}
	if strings.Contains(r.Error.Traceback, "sleep") {
		t.Fatalf("the interrupt came once the cell ran, not before (%d ms): this test tests nothing; make the cell longer\n%s", r.DurationMs, r.Error.Traceback)
	}
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "kept"})
	if got := texts(r); len(got) != 1 || got[0] != "5" {
		t.Fatalf("after the interrupt: %q %+v", got, r.Error)
	}
	// The next cell runs whole: the interrupt was the long cell's only.
	r = runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "import time; time.sleep(0.2); kept + 1"})
	if got := texts(r); !r.Success || len(got) != 1 || got[0] != "6" {
		t.Fatalf("the cell after: %q %+v", got, r.Error)
	}
}
