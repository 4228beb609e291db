package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
)

// TestRunEnvIsPerRun: a run's env applies to that run only; after it each
// name has its old value again, or is unset, in every kernel language.
func TestRunEnvIsPerRun(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	cases := []struct {
		lang, set, read string
	}{
		{agent.Python, "import os; os.environ['SL_KEEP'] = 'old'", "import os; print(os.environ.get('SL_KEEP'), os.environ.get('SL_NEW'))"},
		{agent.JavaScript, "process.env.SL_KEEP = 'old'", "console.log(String(process.env.SL_KEEP), String(process.env.SL_NEW))"},
		{agent.Bash, "export SL_KEEP=old", `echo "${SL_KEEP-None} ${SL_NEW-None}" | sed 's/undefined/None/g'`},
	}
	for _, tc := range cases {
		t.Run(tc.lang, func(t *testing.T) {
			if r := run(t, c, tc.lang, tc.set); !r.Success {
				t.Fatalf("set: %+v", r.Error)
			}
			r := runP(t, c, agent.RunCodeParams{Language: tc.lang, Code: tc.read, Env: map[string]string{"SL_KEEP": "run", "SL_NEW": "run"}})
			if got := r.Stdout; got != "run run\n" {
				t.Fatalf("during the run: %q (%+v)", got, r.Error)
			}
			r = run(t, c, tc.lang, tc.read)
			want := "old None\n"
			if tc.lang == agent.JavaScript {
				want = "old undefined\n"
			}
			if r.Stdout != want {
				t.Fatalf("after the run: %q, want %q", r.Stdout, want)
			}
		})
	}
}

// TestPythonCellDedent: an indented cell runs as IPython runs it (leading
// blank lines dropped, the first line's indentation removed).
func TestPythonCellDedent(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	for _, tc := range []struct{ name, code, out, text string }{
		{"indented", "\n    x = 1\n    if x:\n        print('in')\n    x + 1\n", "in\n", "2"},
		{"tabs", "\tprint('tab')", "tab\n", ""},
		{"blank lines first", "\n\n  \n  print('b')\n", "b\n", ""},
		{"flush left", "y = 3\ny", "", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, c, agent.Python, tc.code)
			if !r.Success || r.Stdout != tc.out || mainText(r) != tc.text {
				t.Fatalf("stdout %q text %q, want %q %q (%+v)", r.Stdout, mainText(r), tc.out, tc.text, r.Error)
			}
		})
	}
}

// TestRunWithoutTimeout: TimeoutMs -1 is accepted as no deadline, and a
// cancel still interrupts such a run (the kernel answers the next one).
func TestRunWithoutTimeout(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	r := runP(t, c, agent.RunCodeParams{Language: agent.Python, Code: "import time; time.sleep(1.2); print('done')", TimeoutMs: -1})
	if !r.Success || r.TimedOut || r.Stdout != "done\n" {
		t.Fatalf("unbounded run: %+v %+v", r, r.Error)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "import time; time.sleep(120)", TimeoutMs: -1}, nil)
	if err == nil {
		t.Fatal("a canceled unbounded run returned no error")
	}
	// The kernel was interrupted, not left sleeping: the next run answers.
	r = run(t, c, agent.Python, "print('next')")
	if r.Stdout != "next\n" {
		t.Fatalf("after the cancel: %+v", r)
	}
}
