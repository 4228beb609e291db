package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// requireIPython: the IPython mode runs the host's python3 here, which
// needs Debian's python3-ipython (scripts/deps.sh).
func requireIPython(t *testing.T) {
	t.Helper()
	ok := hostImports["import IPython"]
	testenv.Require(t, ok, "python3-ipython for /usr/bin/python3 (scripts/deps.sh)")
}

func ipy(t *testing.T, c *agent.Client, code string) *agent.RunCodeResult {
	t.Helper()
	return runP(t, c, agent.RunCodeParams{Language: agent.Python, Code: code, IPython: true})
}

// TestIPythonMode: a cell with IPython set runs through IPython's
// InteractiveShell: every magic, !cmd, get_ipython(), ? help, display(),
// with results, output and errors in the plain kernel's shapes.
func TestIPythonMode(t *testing.T) {
	requireIPython(t)
	c, _ := agenttest.StartClient(t)
	wf := filepath.Join(t.TempDir(), "cell.txt")
	for _, tc := range []struct {
		name, code string
		check      func(r *agent.RunCodeResult) bool
	}{
		{"expression", "x = 20\nx + 22", func(r *agent.RunCodeResult) bool { return r.Success && mainText(r) == "42" && r.Stdout == "" }},
		{"state kept", "x", func(r *agent.RunCodeResult) bool { return mainText(r) == "20" }},
		{"pretty text", "{'b': 1, 'a': [1, 2]}", func(r *agent.RunCodeResult) bool { return mainText(r) == "{'b': 1, 'a': [1, 2]}" }},
		{"trailing semicolon is quiet", "x;", func(r *agent.RunCodeResult) bool { return r.Success && len(r.Results) == 0 }},
		{"timeit", "%timeit -n 3 -r 2 sum(range(100))", func(r *agent.RunCodeResult) bool {
			return r.Success && strings.Contains(r.Stdout, "per loop (mean ± std. dev. of 2 runs, 3 loops each)")
		}},
		{"cell timeit", "%%timeit -n 2 -r 1\ny = [i * i for i in range(50)]", func(r *agent.RunCodeResult) bool {
			return r.Success && strings.Contains(r.Stdout, "per loop")
		}},
		{"writefile", "%%writefile " + wf + "\nfirst line\nsecond line", func(r *agent.RunCodeResult) bool {
			b, err := os.ReadFile(wf)
			return r.Success && err == nil && string(b) == "first line\nsecond line\n" && strings.HasPrefix(r.Stdout, "Writing ")
		}},
		{"get_ipython", "type(get_ipython()).__mro__[1].__name__", func(r *agent.RunCodeResult) bool { return mainText(r) == "'InteractiveShell'" }},
		{"run_line_magic", "get_ipython().run_line_magic('env', 'SL_IPY=yes')\nimport os\nos.environ['SL_IPY']", func(r *agent.RunCodeResult) bool {
			return mainText(r) == "'yes'"
		}},
		{"help", "len?", func(r *agent.RunCodeResult) bool {
			return r.Success && strings.Contains(r.Stdout, "Return the number of items in a container")
		}},
		{"shell", "!echo from-shell; echo to-stderr >&2", func(r *agent.RunCodeResult) bool {
			return r.Success && r.Stdout == "from-shell\n" && r.Stderr == "to-stderr\n"
		}},
		{"shell capture", "files = !printf 'a\\nb\\n'\nfiles", func(r *agent.RunCodeResult) bool { return mainText(r) == "['a', 'b']" }},
		{"exit code", "!exit 3\n_exit_code", func(r *agent.RunCodeResult) bool { return mainText(r) == "3" }},
		{"display", "from IPython.display import display, HTML, Markdown\ndisplay(HTML('<b>bold</b>'), Markdown('*md*'))\nprint('after')", func(r *agent.RunCodeResult) bool {
			return r.Stdout == "after\n" && len(r.Results) == 2 && r.Results[0].HTML == "<b>bold</b>" && !r.Results[0].Main && r.Results[1].Markdown == "*md*"
		}},
		{"display builtin", "display({'k': 1})", func(r *agent.RunCodeResult) bool { return len(r.Results) == 1 && r.Results[0].Text == "{'k': 1}" }},
		{"rich repr", "class R:\n    def _repr_html_(self): return '<i>r</i>'\nR()", func(r *agent.RunCodeResult) bool {
			return len(r.Results) == 1 && r.Results[0].Main && r.Results[0].HTML == "<i>r</i>"
		}},
		{"out history", "Out[1]", func(r *agent.RunCodeResult) bool { return mainText(r) == "42" }},
		{"indented", "\n    a = 5\n    a * 2\n", func(r *agent.RunCodeResult) bool { return mainText(r) == "10" }},
		{"error", "def f():\n    return 1 / 0\nf()", func(r *agent.RunCodeResult) bool {
			e := r.Error
			return !r.Success && e != nil && e.Name == "ZeroDivisionError" && e.Value == "division by zero" &&
				strings.Contains(e.Traceback, "return 1 / 0") && !strings.Contains(e.Traceback, "\x1b[") && r.Stdout == ""
		}},
		{"syntax error", "x = (", func(r *agent.RunCodeResult) bool { return r.Error != nil && r.Error.Name == "SyntaxError" }},
		{"unknown magic", "%nosuchmagic", func(r *agent.RunCodeResult) bool {
			return r.Error != nil && r.Error.Name == "UsageError" && strings.Contains(r.Error.Value, "%nosuchmagic")
		}},
		{"await", "import asyncio\nawait asyncio.sleep(0)\n'awaited'", func(r *agent.RunCodeResult) bool { return mainText(r) == "'awaited'" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ipy(t, c, tc.code)
			if !tc.check(r) {
				t.Fatalf("stdout %q stderr %q results %+v error %+v", r.Stdout, r.Stderr, r.Results, r.Error)
			}
		})
	}
}

// TestIPythonModeFiguresAndFrames: the plain kernel's rich results hold in
// the IPython mode: a figure is a PNG with its chart (also after
// %matplotlib inline), a DataFrame carries its data.
func TestIPythonModeFiguresAndFrames(t *testing.T) {
	requireIPython(t)
	ok := hostImports["import pandas, matplotlib"]
	testenv.Require(t, ok, "python3-pandas and python3-matplotlib (scripts/deps.sh)")
	c, _ := agenttest.StartClient(t)
	r := ipy(t, c, "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 5, 6], label='up')\nplt.title('T')\nplt.show()")
	if r.Error != nil || len(r.Results) != 1 || r.Results[0].PNG == "" || !strings.Contains(string(r.Results[0].Chart), `"type":"line"`) {
		t.Fatalf("figure: error %+v results %d %+v", r.Error, len(r.Results), r.Results)
	}
	r = ipy(t, c, "import pandas as pd\npd.DataFrame({'a': [1, 2]})")
	if len(r.Results) != 1 || string(r.Results[0].Data) != `{"a":[1,2]}` || r.Results[0].HTML == "" || !r.Results[0].Main {
		t.Fatalf("DataFrame: %+v (%+v)", r.Results, r.Error)
	}
}

// TestIPythonModeEnvAndInterrupt: a run's env is restored after it, a
// timeout interrupts the cell (KeyboardInterrupt inside the shell) and the
// kernel keeps its state; plain and IPython cells share one namespace.
func TestIPythonModeEnvAndInterrupt(t *testing.T) {
	requireIPython(t)
	c, _ := agenttest.StartClient(t)
	r := runP(t, c, agent.RunCodeParams{Language: agent.Python, Code: "import os\nos.environ.get('SL_RUN')", Env: map[string]string{"SL_RUN": "during"}, IPython: true})
	if mainText(r) != "'during'" {
		t.Fatalf("env during the run: %+v %+v", r.Results, r.Error)
	}
	if r := ipy(t, c, "os.environ.get('SL_RUN', 'gone')"); mainText(r) != "'gone'" {
		t.Fatalf("env after the run: %+v %+v", r.Results, r.Error)
	}
	if r := run(t, c, agent.Python, "kept = 'plain'"); !r.Success {
		t.Fatalf("plain cell: %+v", r.Error)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "import time\nwhile True:\n    time.sleep(0.01)", TimeoutMs: 2000, IPython: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.KernelRestarted || r.Error == nil || r.Error.Name != "TimeoutError" || !strings.Contains(r.Error.Traceback, "KeyboardInterrupt") {
		t.Fatalf("timeout: %+v %+v", r, r.Error)
	}
	if r := ipy(t, c, "kept"); mainText(r) != "'plain'" {
		t.Fatalf("after the interrupt: %+v %+v", r.Results, r.Error)
	}
}

// TestIPythonPrestart: the "ipython" prestart starts the default python
// kernel with IPython imported; cells without the option stay plain
// (%timeit is the plain kernel's UsageError).
func TestIPythonPrestart(t *testing.T) {
	requireIPython(t)
	c := agenttest.Start(t, "--prestart", agent.PrestartIPython).Dial(t)
	if r := ipy(t, c, "get_ipython() is not None"); mainText(r) != "True" {
		t.Fatalf("ipython cell: %+v %+v", r.Results, r.Error)
	}
	if r := run(t, c, agent.Python, "%timeit 1"); r.Error == nil || !strings.Contains(r.Error.Value, "not IPython") {
		t.Fatalf("plain cell: %+v %+v", r.Results, r.Error)
	}
}
