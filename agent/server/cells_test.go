package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/internal/testenv"
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

// TestPythonNotebookSyntax: the IPython syntax the python kernel knows
// (!cmd, %cd, %env, %time, %%time, %%bash, %matplotlib), and a clear
// UsageError for the rest.
func TestPythonNotebookSyntax(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	for _, tc := range []struct {
		name, code string
		check      func(r *agent.RunCodeResult) bool
	}{
		{"shell", "!echo from-shell\nprint(_exit_code)", func(r *agent.RunCodeResult) bool { return r.Stdout == "from-shell\n0\n" }},
		{"shell capture", "files = !printf 'a\\nb\\n'\nfiles", func(r *agent.RunCodeResult) bool { return mainText(r) == "['a', 'b']" }},
		{"indented shell", "if True:\n    !echo in-block", func(r *agent.RunCodeResult) bool { return r.Stdout == "in-block\n" }},
		{"cd", "%cd /tmp\nimport os\nos.getcwd()", func(r *agent.RunCodeResult) bool { return r.Stdout == "/tmp\n" && mainText(r) == "'/tmp'" }},
		{"env", "%env SL_MAGIC=on\nimport os\nos.environ['SL_MAGIC']", func(r *agent.RunCodeResult) bool { return mainText(r) == "'on'" }},
		{"time", "%time sum(range(10))", func(r *agent.RunCodeResult) bool {
			return mainText(r) == "45" && strings.Contains(r.Stdout, "Wall time:")
		}},
		{"cell time", "%%time\nx = 2\nx * 21", func(r *agent.RunCodeResult) bool {
			return mainText(r) == "42" && strings.Contains(r.Stdout, "CPU times:")
		}},
		{"cell bash", "%%bash\necho one\necho two", func(r *agent.RunCodeResult) bool { return r.Stdout == "one\ntwo\n" }},
		{"matplotlib inline", "%matplotlib inline\n1 + 1", func(r *agent.RunCodeResult) bool { return mainText(r) == "2" }},
		{"unknown magic", "%timeit 1", func(r *agent.RunCodeResult) bool {
			return r.Error != nil && r.Error.Name == "UsageError" && strings.Contains(r.Error.Value, "%timeit")
		}},
		{"syntax error stays one", "x = (", func(r *agent.RunCodeResult) bool { return r.Error != nil && r.Error.Name == "SyntaxError" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, c, agent.Python, tc.code)
			if !tc.check(r) {
				t.Fatalf("stdout %q stderr %q text %q error %+v", r.Stdout, r.Stderr, mainText(r), r.Error)
			}
		})
	}
}

// TestPythonTablesAndImages: a DataFrame result carries its columns as
// data, and PIL's Image.show() and Image.save(path) display the image.
func TestPythonTablesAndImages(t *testing.T) {
	ok := hostImports["import pandas, PIL, numpy"]
	testenv.Require(t, ok, "python3-pandas, python3-pil and python3-numpy (scripts/deps.sh)")
	c, _ := agenttest.StartClient(t)
	r := run(t, c, agent.Python, "import pandas as pd\npd.DataFrame({'a': [1, 2], 't': pd.to_datetime(['2024-01-01', '2024-01-02'])})")
	if len(r.Results) != 1 || string(r.Results[0].Data) != `{"a":[1,2],"t":["2024-01-01T00:00:00","2024-01-02T00:00:00"]}` || r.Results[0].HTML == "" {
		t.Fatalf("DataFrame result: %+v (%+v)", r.Results, r.Error)
	}
	for _, code := range []string{
		"from PIL import Image\nimg = Image.new('RGB', (8, 8), 'red')\nimg.show()\nprint('shown')",
		"from PIL import Image\nImage.new('RGB', (8, 8), 'blue').save('sl-test.png')",
	} {
		r := run(t, c, agent.Python, code)
		if r.Error != nil || len(r.Results) != 1 || r.Results[0].PNG == "" {
			t.Fatalf("%q: results %d, error %+v", code, len(r.Results), r.Error)
		}
	}
}
