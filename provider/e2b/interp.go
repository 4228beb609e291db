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

// codeContext returns the E2B code context of a kernel, creating it on
// first use; every sandlot kernel (the default one too) is one context, so
// RestartKernel can address it.
func (s *Sandbox) codeContext(ctx context.Context, lang, kernel string) (string, error) {
	key := lang + "/" + kernel
	s.mu.Lock()
	id, ok := s.kernels[key]
	s.mu.Unlock()
	if ok {
		return id, nil
	}
	var cc struct {
		ID string `json:"id"`
	}
	if err := s.interpJSON(ctx, http.MethodPost, "/contexts", map[string]string{"language": lang, "cwd": "/home/user"}, &cc); err != nil {
		return "", err
	}
	s.mu.Lock()
	if prev, ok := s.kernels[key]; ok {
		cc.ID = prev
	} else {
		s.kernels[key] = cc.ID
	}
	s.mu.Unlock()
	return cc.ID, nil
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

// RunCode implements contexts.Sandbox with the code interpreter's /execute.
func (s *Sandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
	s.touch()
	lang, err := e2bLanguage(p.Language)
	if err != nil {
		return nil, err
	}
	ccID, err := s.codeContext(ctx, lang, p.Kernel)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(p.TimeoutMs) * time.Millisecond
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	start := time.Now()
	rctx, cancel := context.WithCancel(ctx) // negative timeout: none, ctx ends the run
	if timeout > 0 {
		cancel()
		rctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	b, _ := json.Marshal(map[string]any{"code": p.Code, "context_id": ccID, "env_vars": s.callEnv(p.Env)})
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.interpURL+"/execute", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.interp.Do(req)
	if err != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			return &agent.RunCodeResult{TimedOut: true, DurationMs: time.Since(start).Milliseconds()}, nil
		}
		return nil, transportError(s.interpURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, sandboxStatusError(resp.StatusCode, body)
	}
	res := &agent.RunCodeResult{}
	limit := p.MaxOutput
	if limit <= 0 {
		limit = 1 << 20
	}
	var stdout, stderr strings.Builder
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
				return nil, fmt.Errorf("e2b execute: the response exceeds %d bytes (output and results): %w", callOutputLimit(limit), errdefs.ErrResourceExhausted)
			}
			return nil, fmt.Errorf("e2b execute: bad line %.80q: %w", line, errdefs.ErrUnavailable)
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
			res.ExecutionCount = m.ExecutionCount
		}
	}
	if err := sc.Err(); err != nil {
		switch {
		case errors.Is(err, bufio.ErrTooLong):
			return nil, fmt.Errorf("e2b execute: a line of the response exceeds %d bytes: %w", maxExecuteLine, errdefs.ErrResourceExhausted)
		case errors.Is(err, errResponseTooLarge):
			return nil, fmt.Errorf("e2b execute: the response exceeds %d bytes (output and results): %w", callOutputLimit(limit), errdefs.ErrResourceExhausted)
		case rctx.Err() != nil && ctx.Err() == nil:
			res.TimedOut = true
		default:
			return nil, transportError(s.interpURL, err)
		}
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	res.Success = res.Error == nil && !res.TimedOut
	res.DurationMs = time.Since(start).Milliseconds()
	return res, nil
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
	id, ok := s.kernels[lang+"/"+p.Kernel]
	s.mu.Unlock()
	if !ok {
		return nil // never started: nothing to restart
	}
	return s.interpJSON(ctx, http.MethodPost, "/contexts/"+url.PathEscape(id)+"/restart", nil, nil)
}
