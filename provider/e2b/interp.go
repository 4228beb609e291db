package e2b

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// e2bLanguage maps sandlot kernel languages to the code interpreter's.
func e2bLanguage(l string) (string, error) {
	switch l {
	case agent.Python, "":
		return "python", nil
	case agent.JavaScript:
		return "js", nil
	case agent.TypeScript:
		return "ts", nil
	case agent.Bash, agent.Sh:
		return "bash", nil
	case agent.R, agent.Java:
		return l, nil // E2B's names are the same
	}
	return "", fmt.Errorf("language %q: %w", l, errdefs.ErrInvalidArgument)
}

// kernel is the E2B code context behind one sandlot kernel, and what the
// provider knows of its execution count.
type kernel struct {
	id, key string
	// count is the last execution count the code interpreter reported
	// (number_of_executions); probes is how many of those runs were the
	// provider's own probes (interrupt.go), which callers never see.
	count, probes int
}

// codeContext returns the E2B code context of a kernel, creating it on
// first use; every sandlot kernel (the default one too) is one context, so
// RestartKernel can address it.
func (s *Sandbox) codeContext(ctx context.Context, lang, name string) (*kernel, error) {
	key := lang + "/" + name
	s.mu.Lock()
	k, ok := s.kernels[key]
	s.mu.Unlock()
	if ok {
		return k, nil
	}
	var cc struct {
		ID string `json:"id"`
	}
	if err := s.interpJSON(ctx, http.MethodPost, "/contexts", map[string]string{"language": lang, "cwd": "/home/user"}, &cc); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.kernels[key]; ok {
		return prev, nil
	}
	k = &kernel{id: cc.ID, key: key}
	s.kernels[key] = k
	return k, nil
}

func (s *Sandbox) interpJSON(ctx context.Context, method, p string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.interpURL+p, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.interp.Do(req)
	if err != nil {
		return transportError(s.interpURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return sandboxStatusError(resp.StatusCode, b)
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

// sandboxStatusError: like statusError, but 502 is the edge saying the
// sandbox is gone.
func sandboxStatusError(status int, body []byte) error {
	if status == http.StatusBadGateway {
		return fmt.Errorf("E2B sandbox is not running: %w", errdefs.ErrUnavailable)
	}
	return statusError(status, body)
}

// RunCode implements contexts.Sandbox with the code interpreter's
// /execute, as a local sandbox runs code: sh runs once (runSh), a bash
// cell's nonzero status is its exit code, and a timed-out cell is
// interrupted, or its kernel restarted, before the call returns
// (recoverKernel), so the kernel's next call does not queue behind it.
func (s *Sandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
	s.touch()
	if p.Language == agent.Sh {
		return s.runSh(ctx, p, out)
	}
	lang, err := e2bLanguage(p.Language)
	if err != nil {
		return nil, err
	}
	k, err := s.codeContext(ctx, lang, p.Kernel)
	if err != nil {
		return nil, err
	}
	timeout := runTimeout(p.TimeoutMs)
	rctx, cancel := context.WithCancel(ctx) // no timeout: ctx ends the run
	if timeout > 0 {
		cancel()
		rctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	s.mu.Lock()
	before := k.count
	s.mu.Unlock()
	start := time.Now()
	run, err := s.execute(rctx, k.id, p.Code, p.Env, p.MaxOutput, out)
	// Timed out: the answer was cut by the run's deadline (one that ended
	// just as the deadline passed is complete, and no timeout).
	timedOut := err != nil && rctx.Err() != nil && ctx.Err() == nil
	if err != nil && !timedOut {
		return nil, err
	}
	res := run.res
	if p.Language == agent.Bash && res.Error != nil && res.Error.Name == "" {
		// A bash cell that ended with a nonzero status: Jupyter's bash
		// kernel reports it as an error without a name whose value is the
		// status; a local bash kernel reports the exit code.
		if code, err := strconv.Atoi(strings.TrimSpace(res.Error.Value)); err == nil {
			res.ExitCode, res.Error = code, nil
		}
	}
	s.mu.Lock()
	if run.count > 0 {
		k.count = run.count
	}
	res.ExecutionCount = max(0, k.count-k.probes)
	s.mu.Unlock()
	if timedOut {
		res.TimedOut = true
		res.KernelRestarted = s.recoverKernel(ctx, lang, k, before)
		msg := fmt.Sprintf("execution timed out after %s", timeout)
		if res.KernelRestarted {
			msg += "; the kernel was restarted and its state is gone"
		}
		res.Error = &agent.ExecError{Name: "TimeoutError", Value: msg}
		res.ExitCode = 124 // as a local kernel's timed-out run
	}
	res.Success = res.Error == nil && res.ExitCode == 0 && !res.TimedOut
	res.DurationMs = time.Since(start).Milliseconds()
	return res, nil
}

// runTimeout is the time limit of a run as the agent reads TimeoutMs: 0 is
// the default 60 s, negative none.
func runTimeout(ms int64) time.Duration {
	switch {
	case ms < 0:
		return 0
	case ms == 0:
		return 60 * time.Second
	}
	return time.Duration(ms) * time.Millisecond
}

// runSh runs an sh cell once, as a local sandbox does: a fresh /bin/sh -c
// process through envd, so nothing (a variable, a cd) carries over to the
// next call, and its exit status is the run's exit code.
func (s *Sandbox) runSh(ctx context.Context, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
	timeout := runTimeout(p.TimeoutMs)
	tms := timeout.Milliseconds()
	if timeout == 0 {
		tms = -1
	}
	er, err := s.Exec(ctx, agent.ExecParams{Argv: []string{"/bin/sh", "-c", p.Code}, Env: p.Env, User: p.User,
		TimeoutMs: tms, MaxOutput: p.MaxOutput, Stream: p.Stream}, func(ev agent.OutputEvent) {
		if ev.Stream != agent.Start && out != nil {
			out(ev)
		}
	})
	if err != nil {
		return nil, err
	}
	r := &agent.RunCodeResult{Stdout: er.Stdout, Stderr: er.Stderr, ExitCode: er.ExitCode, TimedOut: er.TimedOut,
		Truncated: er.Truncated, ExecutionCount: 1, DurationMs: er.DurationMs}
	if er.TimedOut {
		r.Error = &agent.ExecError{Name: "TimeoutError", Value: fmt.Sprintf("execution timed out after %s", timeout)}
	}
	r.Success = r.ExitCode == 0 && !r.TimedOut
	return r, nil
}

// execution is what one /execute answered.
type execution struct {
	res *agent.RunCodeResult
	// count is the execution count the interpreter reported (0: none).
	count int
	// ended is set when the answer's end_of_execution arrived.
	ended bool
}

// execute runs code in code context ccID through /execute and reads the
// answer. When ctx ends while the answer is read, what arrived so far is
// returned with ctx's error.
func (s *Sandbox) execute(ctx context.Context, ccID, code string, env map[string]string, maxOutput int64, out contexts.OutputFunc) (*execution, error) {
	run := &execution{res: &agent.RunCodeResult{}}
	res := run.res
	b, _ := json.Marshal(map[string]any{"code": code, "context_id": ccID, "env_vars": s.callEnv(env)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.interpURL+"/execute", bytes.NewReader(b))
	if err != nil {
		return run, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.interp.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return run, ctx.Err()
		}
		return run, transportError(s.interpURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return run, sandboxStatusError(resp.StatusCode, body)
	}
	limit := maxOutput
	if limit <= 0 {
		limit = 1 << 20
	}
	var stdout, stderr strings.Builder
	defer func() { res.Stdout, res.Stderr = stdout.String(), stderr.String() }()
	add := func(sb *strings.Builder, text string) {
		if int64(sb.Len()+len(text)) > limit {
			text = text[:max(0, int(limit)-sb.Len())]
			res.Truncated = true
		}
		sb.WriteString(text)
	}
	body := &cappedReader{r: resp.Body, left: callOutputLimit(limit)}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), maxExecuteLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m struct {
			Type           string `json:"type"`
			Text           string `json:"text"`
			Name           string `json:"name"`
			Value          string `json:"value"`
			Traceback      any    `json:"traceback"`
			ExecutionCount int    `json:"execution_count"`
			IsMainResult   bool   `json:"is_main_result"`
			agent.RichResult
		}
		if err := json.Unmarshal(line, &m); err != nil {
			if body.left <= 0 { // the cut-off last line of a capped response
				return run, fmt.Errorf("e2b execute: the response exceeds %d bytes (output and results): %w", callOutputLimit(limit), errdefs.ErrResourceExhausted)
			}
			return run, fmt.Errorf("e2b execute: bad line %.80q: %w", line, errdefs.ErrUnavailable)
		}
		switch m.Type {
		case "stdout":
			add(&stdout, m.Text)
			if out != nil {
				out(agent.OutputEvent{Stream: agent.Stdout, Data: m.Text})
			}
		case "stderr":
			add(&stderr, m.Text)
			if out != nil {
				out(agent.OutputEvent{Stream: agent.Stderr, Data: m.Text})
			}
		case "result":
			r := m.RichResult
			r.Main, r.Text = m.IsMainResult, m.Text // Text is shadowed by the log lines' field
			res.Results = append(res.Results, r)
			if out != nil {
				out(agent.OutputEvent{Stream: agent.Result, Result: &r})
			}
		case "error":
			tb, ok := m.Traceback.(string)
			if !ok && m.Traceback != nil {
				b, _ := json.Marshal(m.Traceback)
				tb = string(b)
			}
			res.Error = &agent.ExecError{Name: m.Name, Value: m.Value, Traceback: tb}
		case "number_of_executions":
			run.count = m.ExecutionCount
		case "end_of_execution":
			run.ended = true
		}
	}
	if err := sc.Err(); err != nil {
		switch {
		case errors.Is(err, bufio.ErrTooLong):
			return run, fmt.Errorf("e2b execute: a line of the response exceeds %d bytes: %w", maxExecuteLine, errdefs.ErrResourceExhausted)
		case errors.Is(err, errResponseTooLarge):
			return run, fmt.Errorf("e2b execute: the response exceeds %d bytes (output and results): %w", callOutputLimit(limit), errdefs.ErrResourceExhausted)
		case ctx.Err() != nil:
			return run, ctx.Err()
		default:
			return run, transportError(s.interpURL, err)
		}
	}
	return run, nil
}

// Bounds of one /execute answer, which is sandbox output: one NDJSON line
// (a result with a large image is a few MiB), and the whole response, as
// the agent client bounds one call's output (64 MiB, or 4×MaxOutput+16 MiB
// for calls that keep more than 1 MiB per stream).
const maxExecuteLine = 16 << 20

func callOutputLimit(maxOutput int64) int64 {
	if maxOutput > 1<<20 {
		return 4*maxOutput + 16<<20
	}
	return 64 << 20
}

var errResponseTooLarge = errors.New("response too large")

// cappedReader fails with errResponseTooLarge once more than left bytes
// were read.
type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// RestartKernel implements contexts.Sandbox.
func (s *Sandbox) RestartKernel(ctx context.Context, p agent.KernelParams) error {
	s.touch()
	lang, err := e2bLanguage(p.Language)
	if err != nil {
		return err
	}
	s.mu.Lock()
	k, ok := s.kernels[lang+"/"+p.Kernel]
	s.mu.Unlock()
	if !ok {
		return nil // never started: nothing to restart
	}
	return s.restart(ctx, k)
}

// restart restarts k's code context: a fresh kernel, its count from zero.
func (s *Sandbox) restart(ctx context.Context, k *kernel) error {
	if err := s.interpJSON(ctx, http.MethodPost, "/contexts/"+url.PathEscape(k.id)+"/restart", nil, nil); err != nil {
		return err
	}
	s.mu.Lock()
	k.count, k.probes = 0, 0
	s.mu.Unlock()
	return nil
}
