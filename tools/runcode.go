package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/contexts"
)

// RunCodeResult is the result of run_code. The wire type is declared in
// api, which the client SDK imports.
type RunCodeResult = api.RunCodeResult

// BashResult is the result of the bash tool.
type BashResult struct {
	api.PathRef
	Success         bool   `json:"success"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	ExitCode        int    `json:"exitCode"`
	Signal          string `json:"signal,omitempty"`
	TimedOut        bool   `json:"timedOut,omitempty"`
	ExecutionTimeMs int64  `json:"executionTimeMs"`
	SandboxID       string `json:"sandboxId"`
	Truncated       bool   `json:"truncated"`
	// OutputType is error when the command failed (success false), else
	// what its stdout looks like (json, table, text).
	OutputType string `json:"outputType"`
	// StateLost and Notice say that the sandbox's earlier state is gone,
	// as in run_code's result (api.RunCodeResult).
	StateLost bool `json:"stateLost,omitempty"`
	// Woken: the context woke from suspension to disk for this call
	// (api.RunCodeResult.Woken); Notice says so.
	Woken  bool   `json:"woken,omitempty"`
	Notice string `json:"notice,omitempty"`
	// Error names a failure of the call itself (contexts.Failure), not of
	// the command, whose failure is its exit code.
	Error *api.ExecError `json:"error,omitempty"`
}

func (r *Registry) runCode(ctx context.Context, call Call, args map[string]any, out contexts.OutputFunc) (any, error) {
	env, err := callEnv(ctx, "run_code", args)
	if err != nil {
		return nil, err
	}
	req := contexts.ExecuteRequest{
		Env:      env,
		Language: str(args, "language"),
		Code:     str(args, "code"),
		Timeout:  time.Duration(integer(args, "timeout")) * time.Millisecond,
		Network:  r.create(call).Network,
		Template: str(args, "template"),
		IPython:  boolean(args, "ipython"),
	}
	res, err := r.c.Execute(ctx, call.Identity, req, out)
	if err != nil {
		return nil, fmt.Errorf("run_code: %w", err)
	}
	noteSandbox(ctx, res.SandboxID)
	return r.codeResult(res), nil
}

// codeResult converts and bounds an execute result.
func (r *Registry) codeResult(res *contexts.ExecuteResult) *RunCodeResult {
	max := r.cfg.MaxOutput
	out := &RunCodeResult{
		Success:         res.Success,
		ExitCode:        res.ExitCode,
		ExecutionTimeMs: res.DurationMs,
		SandboxID:       res.SandboxID,
		ContextID:       res.ContextID,
		TimedOut:        res.TimedOut,
		KernelRestarted: res.KernelRestarted,
		Rotated:         res.Rotated,
		StateLost:       res.StateLost,
		Woken:           res.Woken,
		Restored:        res.Restored,
		Notice:          notice(res.StateLost, res.Rotated),
		Truncated:       res.Truncated,
		Results:         []api.RichResult{},
	}
	var t1, t2 bool
	out.Stdout, t1 = truncate(res.Stdout, max)
	out.Stderr, t2 = truncate(res.Stderr, max)
	out.Truncated = out.Truncated || t1 || t2
	if res.Error != nil {
		e := api.ExecError(*res.Error)
		var t3, t4 bool
		e.Value, t3 = truncate(e.Value, max)
		e.Traceback, t4 = truncate(trimKernelFrames(e.Traceback), max)
		out.Truncated = out.Truncated || t3 || t4
		out.Error = &e
	}
	for _, rr := range res.Results {
		b, t := boundResult(rr, max)
		out.Truncated = out.Truncated || t
		out.Results = append(out.Results, api.RichResult(b))
	}
	if res.Woken {
		out.Notice = strings.TrimSpace(noticeWoken + " " + out.Notice)
	}
	out.OutputType = resultOutputType(res.Stdout, out.Results)
	if !out.Success {
		out.OutputType = OutputError
	}
	return out
}

// Notices: what a model reads about its sandbox's state in a result.
const (
	noticeLost = "The sandbox of this conversation path was lost (it crashed, was killed or ran out of memory) " +
		"before this call, and this call ran once in a fresh sandbox: the variables, files and installed packages " +
		"of earlier calls are gone."
	noticeWoken = "This conversation path's sandbox was suspended to disk and woke for this call: its files are as " +
		"they were, but its kernels started fresh, so the variables, imports and processes of earlier calls are gone."
	noticeRotated = "This call used up the sandbox's executions: the sandbox ended after it, and the next call " +
		"starts in a fresh sandbox without these variables, files and installed packages."
)

// notice is the sentence a result carries about its sandbox's state.
func notice(stateLost, rotated bool) string {
	var parts []string
	if stateLost {
		parts = append(parts, noticeLost)
	}
	if rotated {
		parts = append(parts, noticeRotated)
	}
	return strings.Join(parts, " ")
}

// trimKernelFrames drops the JavaScript kernel's own stack frames from a
// traceback: the "at ..." lines after the last frame in the user's cell
// (cell.js), which are the kernel's event plumbing (Socket.emit in
// node:events), not the user's code. Frames inside the cell, including
// Node's own between them (node:fs), stay. Other tracebacks (Python's
// kernel already hides its frames) pass unchanged.
func trimKernelFrames(tb string) string {
	lines := strings.Split(tb, "\n")
	last := -1
	for i, l := range lines {
		if isFrame(l) && strings.Contains(l, "cell.js:") {
			last = i
		}
	}
	if last < 0 || last == len(lines)-1 {
		return tb
	}
	out := append([]string(nil), lines[:last+1]...)
	for _, l := range lines[last+1:] {
		if !isFrame(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func isFrame(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "at ") }

// boundResult truncates the text formats of a rich result. JSON over the
// bound cannot be cut and stay JSON, so it moves into Text, truncated.
// Images (PNG, JPEG, SVG) are kept whole: they are not text for a model
// and the agent already bounds frames.
func boundResult(rr agent.RichResult, max int) (agent.RichResult, bool) {
	var cutAny bool
	cut := func(s *string) {
		var t bool
		*s, t = truncate(*s, max)
		cutAny = cutAny || t
	}
	cut(&rr.Text)
	cut(&rr.HTML)
	cut(&rr.Markdown)
	cut(&rr.LaTeX)
	cut(&rr.JavaScript)
	if len(rr.JSON) > max {
		if rr.Text == "" {
			rr.Text, _ = truncate(string(rr.JSON), max)
		}
		rr.JSON = nil
		cutAny = true
	}
	if len(rr.Data) > max {
		rr.Data = nil // the table's HTML and text stay (bounded)
		cutAny = true
	}
	return rr, cutAny
}

func resultOutputType(stdout string, results []api.RichResult) string {
	if strings.TrimSpace(stdout) != "" {
		return DetectOutputType(stdout)
	}
	for _, rr := range results {
		if !rr.Main {
			continue
		}
		switch {
		case len(rr.JSON) > 0:
			return OutputJSON
		case strings.Contains(rr.HTML, "<table"):
			return OutputTable
		case rr.Text != "":
			return DetectOutputType(rr.Text)
		}
	}
	return OutputText
}

func (r *Registry) bash(ctx context.Context, call Call, args map[string]any, out contexts.OutputFunc) (any, error) {
	env, err := callEnv(ctx, "bash", args)
	if err != nil {
		return nil, err
	}
	p := agent.ExecParams{
		Env:       env,
		Shell:     str(args, "command"),
		Cwd:       str(args, "cwd"),
		TimeoutMs: max(integer(args, "timeout"), 0), // negative is unbounded to the agent
		Tag:       "tool:bash",
		Stream:    out != nil,
	}
	var res *BashResult
	err = r.c.Use(ctx, call.Identity, r.create(call), func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		noteSandbox(ctx, sb.ID())
		er, err := sb.Exec(ctx, p, out)
		if err != nil {
			return err
		}
		max := r.cfg.MaxOutput
		stateLost := contexts.StateLost(ctx)
		res = &BashResult{
			Success:         er.ExitCode == 0 && !er.TimedOut && er.Signal == "",
			ExitCode:        er.ExitCode,
			Signal:          er.Signal,
			TimedOut:        er.TimedOut,
			ExecutionTimeMs: er.DurationMs,
			SandboxID:       sb.ID(),
			Truncated:       er.Truncated,
			OutputType:      DetectOutputType(er.Stdout),
			StateLost:       stateLost,
			Notice:          notice(stateLost, false),
		}
		if contexts.Woken(ctx) {
			res.Woken = true
			res.Notice = strings.TrimSpace(noticeWoken + " " + res.Notice)
		}
		if !res.Success {
			res.OutputType = OutputError
		}
		var t1, t2 bool
		res.Stdout, t1 = truncate(er.Stdout, max)
		res.Stderr, t2 = truncate(er.Stderr, max)
		res.Truncated = res.Truncated || t1 || t2
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bash: %w", lost(err))
	}
	return res, nil
}

// rawJSON marshals v for embedding in generated code.
func rawJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}
