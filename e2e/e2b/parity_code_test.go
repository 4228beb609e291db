package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/e2b"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tools"
)

// codeAnswer is what a caller of run_code or run_analysis acts on; the
// fields that name where a call ran (sandbox, timings) differ by nature.
type codeAnswer struct {
	Success         bool
	Stdout, Stderr  string
	ExitCode        int
	Error           string // name: value
	TimedOut        bool
	KernelRestarted bool
	OutputType      string
	Results         []string // main/text of each result
	Result          any      // run_analysis: the last expression's value
	ParsedOutput    any      // run_analysis
	Other           any      // another tool's result as JSON, less what names the sandbox or a time
	Err             string   // the call's error category, when it failed
}

func answerOf(t *testing.T, v any) codeAnswer {
	t.Helper()
	switch r := v.(type) {
	case *tools.RunCodeResult:
		a := codeAnswer{Success: r.Success, Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode,
			TimedOut: r.TimedOut, KernelRestarted: r.KernelRestarted, OutputType: r.OutputType}
		if r.Error != nil {
			a.Error = r.Error.Name + ": " + r.Error.Value
		}
		for _, rr := range r.Results {
			a.Results = append(a.Results, resultText(rr))
		}
		return a
	case *tools.AnalysisResult:
		a := codeAnswer{Success: r.Success, Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode,
			TimedOut: r.TimedOut, OutputType: r.OutputType, Result: r.Result, ParsedOutput: r.ParsedOutput}
		if r.Error != nil {
			a.Error = r.Error.Name + ": " + r.Error.Value
		}
		return a
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var other any
	if err := json.Unmarshal(b, &other); err != nil {
		t.Fatal(err)
	}
	return codeAnswer{Other: scrub(other)}
}

// scrub drops the fields of a tool result that differ by nature between
// two sandboxes: the sandbox's id, times.
func scrub(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{"sandboxId", "executionTimeMs", "modTime"} {
			delete(v, k)
		}
		for k, e := range v {
			v[k] = scrub(e)
		}
	case []any:
		for i, e := range v {
			v[i] = scrub(e)
		}
	}
	return v
}

func resultText(rr api.RichResult) string {
	kind := "display"
	if rr.Main {
		kind = "main"
	}
	if rr.PNG != "" {
		return kind + ": png"
	}
	return kind + ": " + rr.Text
}

// TestCodeParityWithLocal runs the same run_code and run_analysis calls
// through the tools on a manager whose sandboxes are the e2b provider's
// (pointed at a second sandlot's E2B surface) and on one whose sandboxes
// are local, and wants the same answers, call by call: state kept across
// calls, an error and its exit code, a bash exit code, a timeout that
// interrupts the cell so the next call runs at once (state kept), a cell
// that ignores the interrupt (its kernel restarted, as locally), sh run
// once (a variable and a cd do not carry over), javascript,
// run_analysis's result and parsed output, and the file tools on files the
// code then reads.
func TestCodeParityWithLocal(t *testing.T) {
	t.Parallel()
	url := server(t, sandboxProvider(t))
	remote := e2b.New(e2b.Config{APIKey: apiKey, APIURL: url, SandboxURL: url, ConnectTimeout: 5 * time.Second})
	registries := map[string]*tools.Registry{}
	for name, p := range map[string]contexts.Provider{"e2b": remote, "local": sandboxProvider(t)} {
		m := contexts.NewManager(memory.New(), p, contexts.Config{PoolSize: -1})
		if err := m.Start(context.Background()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		registries[name] = tools.New(m, tools.Config{})
	}
	id, _ := contexts.Resolve("tenant-parity", "", "conv-parity", "", "")

	type step struct {
		name, tool, args string
		// bound, when set, is how long each side may take: a call that
		// queued behind a timed-out cell would take longer.
		bound time.Duration
	}
	steps := []step{
		{name: "python state set", tool: "run_code", args: `{"language":"python","code":"x = 20\nprint('set')"}`},
		{name: "python state kept", tool: "run_code", args: `{"language":"python","code":"x * 2 + 2"}`},
		{name: "python error", tool: "run_code", args: `{"language":"python","code":"print('before')\n1/0"}`},
		{name: "python json output", tool: "run_code", args: `{"language":"python","code":"import json\nprint(json.dumps({'a': [1, 2]}))"}`},
		{name: "bash exit code", tool: "run_code", args: `{"language":"bash","code":"echo out; false"}`},
		{name: "bash state", tool: "run_code", args: `{"language":"bash","code":"B=kept; cd /tmp"}`},
		{name: "bash state kept", tool: "run_code", args: `{"language":"bash","code":"echo $B; pwd"}`},
		{name: "sh one-shot sets", tool: "run_code", args: `{"language":"sh","code":"V=gone; cd /tmp; echo $V; pwd"}`},
		{name: "sh one-shot forgets", tool: "run_code", args: `{"language":"sh","code":"echo \"[$V]\"; pwd"}`},
		{name: "sh exit code", tool: "run_code", args: `{"language":"sh","code":"echo err >&2; exit 3"}`},
		{name: "sh timeout", tool: "run_code", args: `{"language":"sh","code":"echo started; sleep 30; echo never","timeout":1000}`},
		{name: "python timeout", tool: "run_code", args: `{"language":"python","code":"import time\nprint('started', flush=True)\ntime.sleep(60)\nprint('never')","timeout":2000}`},
		{name: "after a timeout: no queue, state kept", tool: "run_code", args: `{"language":"python","code":"x + 1","timeout":20000}`, bound: 20 * time.Second},
		{name: "a cell that ignores the interrupt", tool: "run_code", args: `{"language":"python","code":"import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('deaf', flush=True)\ntime.sleep(60)","timeout":2000}`},
		{name: "after a restart: no queue, state gone", tool: "run_code", args: `{"language":"python","code":"print('alive')\n'x' in globals()","timeout":20000}`, bound: 20 * time.Second},
		{name: "javascript", tool: "run_code", args: `{"language":"javascript","code":"let j = 6; console.log('js'); j * 7"}`},
		{name: "javascript error", tool: "run_code", args: `{"language":"javascript","code":"null.x"}`},
		{name: "analysis builtin", tool: "run_analysis", args: `{"analysisType":"tax_calculation","parameters":{"income":50000,"brackets":[{"upTo":10000,"rate":0},{"upTo":null,"rate":20}]}}`},
		{name: "analysis custom", tool: "run_analysis", args: `{"analysisType":"custom","code":"import json\nprint(json.dumps({'n': params['n'] * 2}))\nparams['n']","parameters":{"n":21}}`},
		{name: "analysis error", tool: "run_analysis", args: `{"analysisType":"custom","code":"raise ValueError('bad input')","parameters":{}}`},
		{name: "write a file", tool: "write_file", args: `{"path":"notes/a.txt","content":"one\ntwo\nthree\n"}`},
		{name: "read lines", tool: "read_file", args: `{"path":"notes/a.txt","offset":2,"limit":1}`},
		{name: "edit a file", tool: "edit_file", args: `{"path":"notes/a.txt","old_string":"two","new_string":"2"}`},
		// print: a string's value as a result differs, as E2B's code
		// interpreter sends a string's repr without its quotes
		// (docs/e2b-provider.md).
		{name: "the code sees the file", tool: "run_code", args: `{"language":"python","code":"print(open('notes/a.txt').read())"}`},
		{name: "list files", tool: "list_files", args: `{"path":"notes"}`},
		// a file two levels down: glob's ** crosses directories on both
		{name: "write a nested file", tool: "write_file", args: `{"path":"notes/deep/er/b.txt","content":"nested\n"}`},
		{name: "glob", tool: "glob", args: `{"pattern":"notes/**/*.txt"}`},
		{name: "grep", tool: "grep", args: `{"pattern":"^th","path":"notes"}`},
		{name: "a missing file", tool: "read_file", args: `{"path":"notes/none.txt"}`},
	}
	ctx := context.Background()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			got := map[string]codeAnswer{}
			for _, name := range []string{"local", "e2b"} {
				start := time.Now()
				res, err := registries[name].Call(ctx, tools.Call{Name: s.tool, Identity: id, Args: json.RawMessage(s.args)}, nil)
				if took := time.Since(start); s.bound > 0 && took > s.bound {
					t.Errorf("%s: the call took %s (bound %s): it queued behind the timed-out cell", name, took, s.bound)
				}
				if err != nil {
					got[name] = codeAnswer{Err: string(errdefs.CodeOf(err))}
					continue
				}
				got[name] = answerOf(t, res)
			}
			if d := cmp.Diff(got["local"], got["e2b"]); d != "" {
				t.Fatalf("e2b differs from local (-local +e2b):\n%s", d)
			}
			if testing.Verbose() {
				t.Logf("%s", fmt.Sprintf("%+v", got["local"]))
			}
		})
	}
	// The timed-out code is stopped on both, not left running.
	for name, r := range registries {
		res, err := r.Call(ctx, tools.Call{Name: "bash", Identity: id, Args: json.RawMessage(`{"command":"ps -eo args | grep -c '^sleep 30' || true"}`)}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out := strings.TrimSpace(res.(*tools.BashResult).Stdout); out != "0" {
			t.Errorf("%s: the timed-out sh command still runs (%s sleeps)", name, out)
		}
	}
}
