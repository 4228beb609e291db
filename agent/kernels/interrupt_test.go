package kernels

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/internal/testenv"
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
	// 0.1 s on a loaded 2-core VM against 1 ms, which runs from before the
	// cell is sent) and far below the interrupt's 2 s grace; its last line
	// would run for 30 s. (IPython's cells compile inside its run, where an
	// interrupt is taken as it comes: the window this test needs is too
	// short there to hit on purpose, so only the plain kernel is tested.)
	long := strings.Repeat("x = 1\n", 5_000) + "import time\ntime.sleep(30)\n"
	r := runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: long, TimeoutMs: 1})
	if !r.TimedOut || r.Error == nil || r.Error.Name != "TimeoutError" {
		t.Fatalf("the long cell: timed out %v, error %+v", r.TimedOut, r.Error)
	}
	if r.KernelRestarted {
		t.Fatalf("the interrupt was lost and the kernel killed: %+v (%d ms)", r.Error, r.DurationMs)
	}
	if strings.Contains(r.Error.Traceback, "<cell-") {
		t.Fatalf("the interrupt came once the cell ran, not before (%d ms): this test tests nothing; make the cell longer\n%s", r.DurationMs, r.Error.Traceback)
	}
	wantNext(t, m, "after the interrupt", "kept", "5")
}

// TestInterruptNotForTheNextCell: an interrupt is kept only for the cell
// the agent sent it to. One that reaches the kernel after its cell gave
// its result (here while the result's repr runs), and a SIGINT the agent
// did not send, arriving between cells, leave the next cell alone.
func TestInterruptNotForTheNextCell(t *testing.T) {
	m := needs(t, agent.Python)
	runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "import time\nclass Slow:\n    def __repr__(self):\n        time.sleep(0.5)\n        return 'slow'"})
	r := runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: "Slow()", TimeoutMs: 100})
	if !r.TimedOut || r.KernelRestarted {
		t.Fatalf("the slow repr: timed out %v, restarted %v, error %+v", r.TimedOut, r.KernelRestarted, r.Error)
	}
	wantNext(t, m, "after an interrupt that came after its cell's code", "time.sleep(0.2); 1", "1")

	sent := filepath.Join(t.TempDir(), "sent")
	runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: `import os, signal, threading
def _kill():
    os.kill(os.getpid(), signal.SIGINT)
    open(` + "'" + sent + "'" + `, "w").close()
threading.Timer(0.2, _kill).start()`})
	testenv.WaitFor(t, "the SIGINT between cells", 30*time.Second, func() bool { _, err := os.Stat(sent); return err == nil })
	wantNext(t, m, "after a SIGINT the agent did not send", "time.sleep(0.2); 2", "2")
}

// wantNext runs code, which must succeed with the one result want.
func wantNext(t *testing.T, m *Manager, what, code, want string) {
	t.Helper()
	r := runIn(t, m, agent.RunCodeParams{Language: agent.Python, Code: code})
	if got := texts(r); !r.Success || len(got) != 1 || got[0] != want {
		t.Fatalf("%s: %q %+v", what, got, r.Error)
	}
}

// TestStraySIGINTKeepsKernels: a SIGINT that reaches an R, node or Java
// kernel between cells (a late interrupt for a cell that already ended, or
// one the agent never sent: here from a process the cell started, once
// the cell gave its result) leaves the kernel and its state alone. R used
// to halt on one (a non-interactive R ends on an interrupt raised outside a
// handler), taking its state. python's own case is
// TestInterruptNotForTheNextCell.
func TestStraySIGINTKeepsKernels(t *testing.T) {
	for _, c := range []struct{ lang, set, kill, get, want string }{
		{agent.R, "kept <- 5",
			`system2("sh", c("-c", shQuote(paste0("` + afterGo + `", Sys.getpid(), "; touch SENT"))), wait = FALSE)`,
			"kept", "[1] 5"},
		{agent.JavaScript, "globalThis.kept = 5",
			`require('child_process').spawn('sh', ['-c', '` + afterGo + `' + process.pid + '; touch SENT'], {detached: true, stdio: 'ignore'}).unref()`,
			"kept", "5"},
		{agent.Java, "int kept = 5;",
			`new ProcessBuilder("sh", "-c", "` + afterGo + `" + ProcessHandle.current().pid() + "; touch SENT").start();`,
			"kept", "5"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			m := needs(t, c.lang)
			dir := t.TempDir()
			kill := strings.NewReplacer("SENT", filepath.Join(dir, "sent"), "GO", filepath.Join(dir, "go")).Replace(c.kill)
			for _, code := range []string{c.set, kill} {
				if r := runIn(t, m, agent.RunCodeParams{Language: c.lang, Code: code}); r.Error != nil {
					t.Fatalf("%q: %+v", code, r.Error)
				}
			}
			// The signal goes once the cell that started its sender gave
			// its result, and is pending before "sent" exists.
			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, "the stray SIGINT", 30*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "sent")); return err == nil })
			r := runIn(t, m, agent.RunCodeParams{Language: c.lang, Code: c.get})
			if got := texts(r); !r.Success || r.KernelRestarted || len(got) != 1 || got[0] != c.want {
				t.Fatalf("after a stray SIGINT: %q, restarted %v, error %+v, stderr %q", got, r.KernelRestarted, r.Error, r.Stderr)
			}
		})
	}
}

// afterGo is a shell command's start that waits for the file GO, then
// sends SIGINT to the pid that follows it.
const afterGo = "while [ ! -e GO ]; do sleep 0.01; done; kill -INT "

// TestRInterruptBeforeCellRuns: an R run whose timeout passes before its
// cell's code starts (here 1 ms, which runs from before the cell is sent)
// is interrupted once it starts, and the kernel keeps its state. The
// driver drops an interrupt that comes before its cell starts (it is not
// the cell's), so the agent holds the cell's until the driver says the
// cell started.
func TestRInterruptBeforeCellRuns(t *testing.T) {
	m := needs(t, agent.R)
	runIn(t, m, agent.RunCodeParams{Language: agent.R, Code: "kept <- 5"})
	for i := 0; i < 5; i++ {
		r := runIn(t, m, agent.RunCodeParams{Language: agent.R, Code: "Sys.sleep(30)", TimeoutMs: 1})
		if !r.TimedOut || r.KernelRestarted || r.Error == nil || r.Error.Name != "TimeoutError" {
			t.Fatalf("run %d: timed out %v, restarted %v, error %+v (%d ms)", i, r.TimedOut, r.KernelRestarted, r.Error, r.DurationMs)
		}
	}
	if r := runIn(t, m, agent.RunCodeParams{Language: agent.R, Code: "kept"}); r.KernelRestarted || len(texts(r)) != 1 || texts(r)[0] != "[1] 5" {
		t.Fatalf("after the interrupts: %q, restarted %v, error %+v", texts(r), r.KernelRestarted, r.Error)
	}
}

// TestRInterruptAnywhereInTheLoop: an interrupt that becomes due at any
// point of the R driver's own work never ends the kernel, never loses a
// result, and never leaves a run's env set. Each cell sends itself a
// SIGINT while it holds interrupts, after a different number of
// evaluations; R takes a pending interrupt only every so many evaluations,
// so each is taken at a different point after the hold ends: at the end
// of the cell (an interrupted run) or in the driver (dropped).
func TestRInterruptAnywhereInTheLoop(t *testing.T) {
	m := needs(t, agent.R)
	runIn(t, m, agent.RunCodeParams{Language: agent.R, Code: "kept <- 5"})
	for n := 0; n < 600; n++ {
		code := strings.Repeat("invisible(NULL);", n) + "suspendInterrupts(tools::pskill(Sys.getpid(), 2L)); invisible(7)"
		r := runIn(t, m, agent.RunCodeParams{Language: agent.R, Code: code, Env: map[string]string{"SANDLOT_T": "x"}, TimeoutMs: 20_000})
		if r.KernelRestarted || r.TimedOut || (r.Error != nil && r.Error.Name != "KeyboardInterrupt") {
			t.Fatalf("padding %d: restarted %v, timed out %v, error %+v (%d ms)", n, r.KernelRestarted, r.TimedOut, r.Error, r.DurationMs)
		}
	}
	r := runIn(t, m, agent.RunCodeParams{Language: agent.R, Code: "c(kept, Sys.getenv('SANDLOT_T', 'unset'))"})
	if r.KernelRestarted || len(texts(r)) != 1 || texts(r)[0] != `[1] "5"     "unset"` {
		t.Fatalf("after the sweep: %q, restarted %v, error %+v", texts(r), r.KernelRestarted, r.Error)
	}
}

// TestJavaSIGINTInACellNotTheAgents: the JVM handles a signal late, on a
// thread of its own, so a SIGINT sent before a cell (a stray one, or the
// agent's for a cell that ended first) can be handled while the cell
// runs. Here the cell sends one to its own JVM and runs on; the driver
// stops a cell only for the agent's tagged interrupt, so the cell gives
// its value. JShell stopped it before, without a word: no value, no error.
func TestJavaSIGINTInACellNotTheAgents(t *testing.T) {
	m := needs(t, agent.Java)
	def := `int seven() throws Exception {
    new ProcessBuilder("sh", "-c", "kill -INT " + ProcessHandle.current().pid()).start().waitFor();
    Thread.sleep(1000);
    return 7;
}`
	if r := runIn(t, m, agent.RunCodeParams{Language: agent.Java, Code: def}); r.Error != nil {
		t.Fatalf("define: %+v", r.Error)
	}
	r := runIn(t, m, agent.RunCodeParams{Language: agent.Java, Code: "seven()"})
	if got := texts(r); !r.Success || r.KernelRestarted || len(got) != 1 || got[0] != "7" {
		t.Fatalf("a cell that got a SIGINT the agent did not send: %q, restarted %v, error %+v, stderr %q", got, r.KernelRestarted, r.Error, r.Stderr)
	}
}
