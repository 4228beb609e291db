package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/agenttest"
	"github.com/sandlot/sandlot/agent/typescript"
)

func run(t *testing.T, c *agent.Client, lang, code string) *agent.RunCodeResult {
	t.Helper()
	return runP(t, c, agent.RunCodeParams{Language: lang, Code: code})
}

func runP(t *testing.T, c *agent.Client, p agent.RunCodeParams) *agent.RunCodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// As the host runs a cell: a typescript one is transpiled first.
	r, err := typescript.RunCode(ctx, c, p, nil)
	if err != nil {
		t.Fatalf("%s %q: %v", p.Language, p.Code, err)
	}
	return r
}

func mainText(r *agent.RunCodeResult) string {
	for _, rr := range r.Results {
		if rr.Main {
			return rr.Text
		}
	}
	return ""
}

func TestKernelStatePersists(t *testing.T) {
	c, a := agenttest.StartClient(t)
	cases := []struct {
		lang  string
		steps []string
		check func(r *agent.RunCodeResult) bool
	}{
		{agent.Python, []string{
			"import json\nx = 41\ndef f(v):\n    return v + 1",
			"import os\nos.chdir('sub') if os.path.isdir('sub') else (os.mkdir('sub'), os.chdir('sub'))\nos.environ['SANDLOT_T'] = 'py'",
			"print(os.getcwd().endswith('/sub'), os.environ['SANDLOT_T'], json.dumps(f(x)))",
		}, func(r *agent.RunCodeResult) bool { return r.Stdout == "True py 42\n" }},
		{agent.JavaScript, []string{
			"var x = 41; let y = 1; function f(v) { return v + y; }",
			"const path = require('path'); process.chdir(require('os').tmpdir()); process.env.SANDLOT_T = 'js'",
			"console.log(f(x), process.env.SANDLOT_T, process.cwd() === require('os').tmpdir(), typeof path.join)",
		}, func(r *agent.RunCodeResult) bool { return r.Stdout == "42 js true function\n" }},
		{agent.TypeScript, []string{
			"interface P { n: number }\nconst tp: P = { n: 41 };\nfunction tf(p: P): number { return p.n + 1 }",
			"console.log(tf(tp))",
		}, func(r *agent.RunCodeResult) bool { return r.Stdout == "42\n" }},
		{agent.Bash, []string{
			"X=41; f() { echo $(( $1 + 1 )); }",
			"mkdir -p bsub && cd bsub; export SANDLOT_T=sh",
			`f $X; basename "$PWD"; sh -c 'echo $SANDLOT_T'`,
		}, func(r *agent.RunCodeResult) bool { return r.Stdout == "42\nbsub\nsh\n" }},
	}
	for _, tc := range cases {
		t.Run(tc.lang, func(t *testing.T) {
			var r *agent.RunCodeResult
			for _, s := range tc.steps {
				r = run(t, c, tc.lang, s)
				if !r.Success {
					t.Fatalf("step %q failed: %+v %+v", s, r, r.Error)
				}
			}
			if !tc.check(r) {
				t.Fatalf("state lost: stdout %q stderr %q", r.Stdout, r.Stderr)
			}
		})
	}
	_ = a
}

func TestKernelLastExpression(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	cases := []struct {
		lang, code, want string
	}{
		{agent.Python, "1+1", "2"},
		{agent.Python, "a = [1, 2]\na.append(3)\na", "[1, 2, 3]"},
		{agent.Python, "x = 5", ""},
		{agent.Python, "print('p')", ""},
		{agent.Python, "import asyncio\nawait asyncio.sleep(0)\n'awaited'", "'awaited'"},
		{agent.JavaScript, "1+1", "2"},
		{agent.JavaScript, "const o = {a: 1}; o", "{ a: 1 }"},
		{agent.JavaScript, "const v = await new Promise(r => setTimeout(() => r(7), 10)); v * 6", "42"},
		{agent.JavaScript, "'str'", "'str'"},
		{agent.TypeScript, "const tt: number = await Promise.resolve(20); tt + 1", "21"},
	}
	for _, tc := range cases {
		t.Run(tc.lang+"/"+tc.code, func(t *testing.T) {
			r := run(t, c, tc.lang, tc.code)
			if !r.Success {
				t.Fatalf("failed: %+v %+v", r, r.Error)
			}
			if got := mainText(r); got != tc.want {
				t.Fatalf("main result = %q, want %q (results %+v)", got, tc.want, r.Results)
			}
		})
	}
}

func TestPythonRich(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	t.Run("matplotlib png", func(t *testing.T) {
		r := run(t, c, agent.Python, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('t')\nplt.show()")
		if !r.Success {
			t.Fatalf("failed: %+v %+v", r, r.Error)
		}
		var png []byte
		for _, rr := range r.Results {
			if rr.PNG != "" {
				b, err := base64.StdEncoding.DecodeString(rr.PNG)
				if err != nil {
					t.Fatal(err)
				}
				png = b
			}
		}
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("no PNG result: %+v", r.Results)
		}
		// Figures are closed after capture: the next run has none.
		if r2 := run(t, c, agent.Python, "len(plt.get_fignums())"); mainText(r2) != "0" {
			t.Fatalf("figures left open: %q", mainText(r2))
		}
	})
	t.Run("html repr", func(t *testing.T) {
		r := run(t, c, agent.Python, "import pandas as pd\npd.DataFrame({'a': [1, 2]})")
		if len(r.Results) != 1 || !strings.Contains(r.Results[0].HTML, "<table") || r.Results[0].Text == "" {
			t.Fatalf("results = %+v", r.Results)
		}
	})
	t.Run("error", func(t *testing.T) {
		r := run(t, c, agent.Python, "def boom():\n    raise ValueError('bad value')\nboom()")
		if r.Success || r.Error == nil {
			t.Fatalf("no error: %+v", r)
		}
		e := r.Error
		if e.Name != "ValueError" || e.Value != "bad value" {
			t.Fatalf("error = %+v", e)
		}
		if !strings.Contains(e.Traceback, "boom()") || !strings.Contains(e.Traceback, "ValueError: bad value") {
			t.Fatalf("traceback lacks user frames: %s", e.Traceback)
		}
		if strings.Contains(e.Traceback, "_sandlot") || strings.Contains(e.Traceback, `File "<string>"`) {
			t.Fatalf("traceback shows driver frames: %s", e.Traceback)
		}
		// The kernel is fine afterwards.
		if r := run(t, c, agent.Python, "2*3"); mainText(r) != "6" {
			t.Fatalf("after error: %+v", r)
		}
	})
	t.Run("syntax error", func(t *testing.T) {
		r := run(t, c, agent.Python, "def (:")
		if r.Error == nil || r.Error.Name != "SyntaxError" {
			t.Fatalf("error = %+v", r.Error)
		}
	})
	t.Run("sys.exit keeps kernel", func(t *testing.T) {
		run(t, c, agent.Python, "keep = 1")
		r := run(t, c, agent.Python, "import sys; sys.exit(3)")
		if r.Error == nil || r.Error.Name != "SystemExit" {
			t.Fatalf("error = %+v", r.Error)
		}
		if r := run(t, c, agent.Python, "keep"); mainText(r) != "1" {
			t.Fatalf("state lost after SystemExit: %+v", r)
		}
	})
}

func TestJavaScriptError(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	r := run(t, c, agent.JavaScript, "function boom() { throw new TypeError('nope') }\nboom()")
	if r.Error == nil || r.Error.Name != "TypeError" || r.Error.Value != "nope" || !strings.Contains(r.Error.Traceback, "boom") {
		t.Fatalf("error = %+v", r.Error)
	}
	if strings.Contains(r.Error.Traceback, "[eval]") {
		t.Fatalf("driver frames in traceback: %s", r.Error.Traceback)
	}
	r = run(t, c, agent.TypeScript, "const bad: number = ;")
	if r.Error == nil || r.Error.Name != "TypeScriptError" {
		t.Fatalf("ts error = %+v", r.Error)
	}
}

func TestKernelTimeoutRecovery(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	cases := []struct {
		name, lang, setup, hang, check, want string
		keepsState                           bool
	}{
		{"python sleep", agent.Python, "kept = 'yes'", "import time\ntime.sleep(30)", "kept", "'yes'", true},
		{"python busy loop", agent.Python, "kept = 'yes'", "while True:\n    pass", "kept", "'yes'", true},
		{"javascript busy loop", agent.JavaScript, "var kept = 'yes'", "while (true) {}", "typeof kept", "'undefined'", false},
		{"javascript await", agent.JavaScript, "var kept2 = 'yes'", "await new Promise(() => {})", "kept2", "'yes'", true},
		{"bash sleep", agent.Bash, "KEPT=yes", "sleep 30", "echo ok", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run(t, c, tc.lang, tc.setup)
			start := time.Now()
			r := runP(t, c, agent.RunCodeParams{Language: tc.lang, Code: tc.hang, TimeoutMs: 1000})
			if !r.TimedOut || r.Success || r.Error == nil || r.Error.Name != "TimeoutError" {
				t.Fatalf("want timeout, got %+v err %+v", r, r.Error)
			}
			if d := time.Since(start); d > 6*time.Second {
				t.Fatalf("timeout took %s", d)
			}
			if r.KernelRestarted == tc.keepsState {
				t.Fatalf("KernelRestarted = %v, want %v", r.KernelRestarted, !tc.keepsState)
			}
			r = run(t, c, tc.lang, tc.check)
			if !r.Success {
				t.Fatalf("next call failed: %+v %+v", r, r.Error)
			}
			if tc.want != "" && mainText(r) != tc.want {
				t.Fatalf("next call = %q, want %q", mainText(r), tc.want)
			}
			if tc.lang == agent.Bash && r.Stdout != "ok\n" {
				t.Fatalf("next call stdout = %q", r.Stdout)
			}
		})
	}
}

func TestBashExitRestarts(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	run(t, c, agent.Bash, "V=1")
	r := run(t, c, agent.Bash, "echo before; exit 7")
	if r.ExitCode != 7 || r.Success || !r.KernelRestarted || r.Stdout != "before\n" {
		t.Fatalf("exit: %+v", r)
	}
	r = run(t, c, agent.Bash, `echo "v=$V"; false`)
	if r.Stdout != "v=\n" || r.ExitCode != 1 {
		t.Fatalf("after exit: %+v", r)
	}
	r = run(t, c, agent.Bash, "true")
	if !r.Success || r.ExitCode != 0 {
		t.Fatalf("true: %+v", r)
	}
}

func TestKernelOutputFlood(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	cases := []struct{ lang, code string }{
		{agent.Python, "print('x' * 3_000_000)\nimport sys\nsys.stderr.write('e' * 3_000_000)\n'done'"},
		{agent.JavaScript, "process.stdout.write('x'.repeat(3000000)); 'done'"},
		{agent.Bash, "head -c 3000000 /dev/zero | tr '\\0' x"},
		{agent.Sh, "head -c 3000000 /dev/zero | tr '\\0' x"},
	}
	for _, tc := range cases {
		t.Run(tc.lang, func(t *testing.T) {
			r := run(t, c, tc.lang, tc.code)
			if !r.Truncated || len(r.Stdout) != 1<<20 {
				t.Fatalf("truncated=%v len(stdout)=%d", r.Truncated, len(r.Stdout))
			}
			if tc.lang == agent.Python && len(r.Stderr) != 1<<20 {
				t.Fatalf("len(stderr)=%d", len(r.Stderr))
			}
		})
	}
	t.Run("endless flood times out", func(t *testing.T) {
		r := runP(t, c, agent.RunCodeParams{Language: agent.Python, Code: "while True:\n    print('y' * 1000)", TimeoutMs: 1500, MaxOutput: 1000})
		if !r.TimedOut || !r.Truncated || len(r.Stdout) != 1000 {
			t.Fatalf("timedOut=%v truncated=%v len=%d", r.TimedOut, r.Truncated, len(r.Stdout))
		}
		if r := run(t, c, agent.Python, "'alive'"); mainText(r) != "'alive'" {
			t.Fatalf("after flood: %+v", r)
		}
	})
}

func TestKernelStreamingAndSubprocessOutput(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	var mu sync.Mutex
	var got []string
	r, err := c.RunCode(context.Background(), agent.RunCodeParams{
		Language: agent.Python,
		Code:     "import os, time\nprint('a', flush=True)\nos.system('echo b')\ntime.sleep(0.05)\nprint('c')\n1",
		Stream:   true,
	}, func(ev agent.OutputEvent) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Stream == agent.Stdout {
			got = append(got, ev.Data)
		}
		if ev.Stream == agent.Result {
			got = append(got, "result:"+ev.Result.Text)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "a\nb\nc\n" {
		t.Fatalf("stdout = %q stderr = %q", r.Stdout, r.Stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if s := strings.Join(got, ""); s != "a\nb\nc\nresult:1" {
		t.Fatalf("streamed = %q", s)
	}
}

func TestNamedKernelsAreSeparate(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	runP(t, c, agent.RunCodeParams{Language: agent.Python, Code: "who = 'a'", Kernel: "a"})
	runP(t, c, agent.RunCodeParams{Language: agent.Python, Code: "who = 'b'", Kernel: "b"})
	if r := runP(t, c, agent.RunCodeParams{Language: agent.Python, Code: "who", Kernel: "a"}); mainText(r) != "'a'" {
		t.Fatalf("kernel a sees %q", mainText(r))
	}
	if r := run(t, c, agent.Python, "'who' in globals()"); mainText(r) != "False" {
		t.Fatalf("default kernel sees named kernel state: %q", mainText(r))
	}
	// Restart drops state.
	if err := c.RestartKernel(context.Background(), agent.KernelParams{Language: agent.Python, Kernel: "a"}); err != nil {
		t.Fatal(err)
	}
	if r := runP(t, c, agent.RunCodeParams{Language: agent.Python, Code: "'who' in globals()", Kernel: "a"}); mainText(r) != "False" {
		t.Fatalf("restart kept state: %q", mainText(r))
	}
}

func TestKernelRunCancel(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	run(t, c, agent.Python, "kept = 1")
	// Cancelled once the cell says it runs (a fixed delay could land
	// before, on a loaded machine); bounded well below its 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.RunCode(ctx, agent.RunCodeParams{Language: agent.Python, Code: "import time; print('in', flush=True); time.sleep(30)", Stream: true}, func(ev agent.OutputEvent) {
		if ev.Stream == agent.Stdout && strings.Contains(ev.Data, "in") {
			cancel()
		}
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v, want cancelled", err)
	}
	// The cancel interrupted the kernel: the next run does not wait 30 s.
	start := time.Now()
	if r := run(t, c, agent.Python, "kept"); mainText(r) != "1" {
		t.Fatalf("after cancel: %+v", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("next run waited %s", d)
	}
}

func TestBashKeepsWhitespaceAndHeredocs(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	r := run(t, c, agent.Bash, "cat <<'EOF'\n  indented \\n kept  \nEOF\n")
	if r.Stdout != "  indented \\n kept  \n" || r.Stderr != "" {
		t.Fatalf("stdout = %q stderr = %q", r.Stdout, r.Stderr)
	}
}

func TestPrestart(t *testing.T) {
	a := agenttest.Start(t, "--prestart", "python")
	deadline := time.Now().Add(10 * time.Second)
	for childrenNamed(t, a.Cmd.Process.Pid, "python3") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("python kernel was not prestarted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := a.Dial(t)
	if r := run(t, c, agent.Python, "1+1"); mainText(r) != "2" || r.ExecutionCount != 1 {
		t.Fatalf("first run on prestarted kernel: %+v", r)
	}
	if n := childrenNamed(t, a.Cmd.Process.Pid, "python3"); n != 1 {
		t.Fatalf("%d python kernels, want 1", n)
	}
}

// TestJavaScriptRedeclare: re-running a cell that declares a top-level
// const/let/class works, in javascript and typescript, with and without
// top-level await, and the last expression is still the result.
func TestJavaScriptRedeclare(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	for _, lang := range []string{agent.JavaScript, agent.TypeScript} {
		t.Run(lang, func(t *testing.T) {
			steps := []struct{ code, want string }{
				{"const x = 1", ""},
				{"const x = 2; x", "2"},
				{"let y = 3; let z; [y, z]", "[ 3, undefined ]"},
				{"let y = 4, z = 5; y + z", "9"},
				{"let z; typeof z", "'undefined'"},
				{"class K { v() { return 1 } }", ""},
				{"class K { v() { return 2 } }; new K().v()", "2"},
				{"const w = await Promise.resolve(6); w", "6"},
				{"const w = await Promise.resolve(7); w * x", "14"},
				{"for (let i = 0; i < 2; i++) { const x = 9 }\nconst s = `const x = 1; let q`; x", "2"},
			}
			for _, s := range steps {
				r := run(t, c, lang, s.code)
				if !r.Success {
					t.Fatalf("%q failed: %+v", s.code, r.Error)
				}
				if got := mainText(r); got != s.want {
					t.Fatalf("%q = %q, want %q", s.code, got, s.want)
				}
			}
		})
	}
}

// TestJavaScriptModuleSyntax: a cell written as an ES module (import,
// export) runs as E2B's JavaScript kernel runs it, and its imported names
// persist into later cells.
func TestJavaScriptModuleSyntax(t *testing.T) {
	c, _ := agenttest.StartClient(t)
	steps := []struct{ code, want string }{
		{"import { readFileSync } from 'fs'\ntypeof readFileSync", "'function'"},
		{"typeof readFileSync", "'function'"},
		{"import path, * as ns from 'node:path'\nimport 'os'\npath.basename('/a/b.txt') + typeof ns.join", "'b.txtfunction'"},
		{"import { join as j } from 'path'; j('a', 'b')", "'a/b'"},
		{"export const e = 5; e * 2", "10"},
		{"const s = 'import x from \"y\"'; s.length", "17"},
	}
	for _, s := range steps {
		r := run(t, c, agent.JavaScript, s.code)
		if !r.Success {
			t.Fatalf("%q failed: %+v", s.code, r.Error)
		}
		if got := mainText(r); got != s.want {
			t.Fatalf("%q = %q, want %q", s.code, got, s.want)
		}
	}
	r := run(t, c, agent.JavaScript, "import { x } from 'no-such-package-here'")
	if r.Success || r.Error == nil || !strings.Contains(r.Error.Value, "no-such-package-here") {
		t.Fatalf("a missing package: %+v", r.Error)
	}
}
