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
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sandlot/sandlot/agent"
	fspb "github.com/sandlot/sandlot/api/e2bcompat/envd/filesystem"
	"github.com/sandlot/sandlot/api/e2bcompat/envd/filesystem/filesystemconnect"
	pb "github.com/sandlot/sandlot/api/e2bcompat/envd/process"
	"github.com/sandlot/sandlot/api/e2bcompat/envd/process/processconnect"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Sandbox is one E2B sandbox, reached through envd and the code
// interpreter. It is safe for concurrent use.
type Sandbox struct {
	p         *Provider
	id, token string
	envdURL   string
	interpURL string
	envd      *http.Client
	interp    *http.Client
	proc      processconnect.ProcessClient
	fs        filesystemconnect.FilesystemClient

	mu         sync.Mutex
	ttl        time.Duration
	lastExtend time.Time
	kernels    map[string]string // language/kernel -> E2B code context id
}

var _ contexts.Sandbox = (*Sandbox)(nil)

func (s *Sandbox) headers(port string) http.Header {
	h := http.Header{}
	h.Set("E2b-Sandbox-Id", s.id)
	h.Set("E2b-Sandbox-Port", port)
	if s.token != "" {
		h.Set("X-Access-Token", s.token)
	}
	return h
}

// maxEnvdAnswer bounds one Connect message from envd (a listing of about
// 150 000 entries). envd runs inside the sandbox: its answers are bounded
// like any sandbox output, and compressed answers are not accepted, so
// none can inflate.
const maxEnvdAnswer = 32 << 20

func (s *Sandbox) initRPC() {
	opts := connect.WithClientOptions(connect.WithProtoJSON(), connect.WithReadMaxBytes(maxEnvdAnswer),
		connect.WithAcceptCompression("gzip", nil, nil))
	s.proc = processconnect.NewProcessClient(s.envd, s.envdURL, opts)
	s.fs = filesystemconnect.NewFilesystemClient(s.envd, s.envdURL, opts)
}

// ID implements contexts.Sandbox.
func (s *Sandbox) ID() string { return s.id }

// Close implements contexts.Sandbox; the sandbox keeps running.
func (s *Sandbox) Close() error { return nil }

// touch extends the E2B timeout to the TTL from now, at most every
// ExtendEvery, in the background: an operation never waits for it.
func (s *Sandbox) touch() {
	s.mu.Lock()
	if s.ttl <= 0 || time.Since(s.lastExtend) < s.p.cfg.ExtendEvery {
		s.mu.Unlock()
		return
	}
	s.lastExtend = time.Now()
	ttl := s.ttl
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.p.cfg.ConnectTimeout)
		defer cancel()
		if err := s.p.setTimeout(ctx, s.id, ttl); err != nil {
			s.p.log.Warn("e2b extend timeout", "sandbox", s.id, "err", err)
		}
	}()
}

// SetTTL changes the timeout kept by touch and applies it now.
func (s *Sandbox) SetTTL(ctx context.Context, ttl time.Duration) error {
	s.mu.Lock()
	s.ttl, s.lastExtend = ttl, time.Now()
	s.mu.Unlock()
	return s.p.setTimeout(ctx, s.id, ttl)
}

// rpcError maps a Connect error to its errdefs category (same names).
func rpcError(op string, err error) error {
	if err == nil {
		return nil
	}
	code := connect.CodeOf(err)
	cat := errdefs.FromCode(errdefs.Code(code.String()))
	if code == connect.CodeUnknown || code == connect.CodeInternal || code == connect.CodeUnimplemented {
		cat = errdefs.ErrUnavailable
	}
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	return fmt.Errorf("e2b %s: %s: %w", op, msg, cat)
}

func (s *Sandbox) waitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = s.Ping(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("envd not healthy: %v: %w", last, errdefs.ErrUnavailable)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Ping implements contexts.Sandbox: envd's /health.
func (s *Sandbox) Ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.envdURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := s.envd.Do(req)
	if err != nil {
		return transportError(s.envdURL, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("envd health %d: %w", resp.StatusCode, errdefs.ErrUnavailable)
	}
	return nil
}

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
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, _ := json.Marshal(map[string]any{"code": p.Code, "context_id": ccID, "env_vars": p.Env})
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

var signalStatus = regexp.MustCompile(`^signal: (.+)$`)

// Exec implements contexts.Sandbox with envd's Process.Start.
func (s *Sandbox) Exec(ctx context.Context, p agent.ExecParams, out contexts.OutputFunc) (*agent.ExecResult, error) {
	s.touch()
	cfg := &pb.ProcessConfig{Envs: p.Env}
	switch {
	case p.Shell != "":
		cfg.Cmd, cfg.Args = "/bin/bash", []string{"-c", p.Shell}
	case len(p.Argv) > 0:
		cfg.Cmd, cfg.Args = p.Argv[0], p.Argv[1:]
	default:
		return nil, fmt.Errorf("exec: argv or shell is required: %w", errdefs.ErrInvalidArgument)
	}
	if p.Cwd != "" {
		cfg.Cwd = &p.Cwd
	}
	timeout := time.Duration(p.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	needStdin := p.KeepStdin || p.Stdin != ""
	req := &pb.StartRequest{Process: cfg, Stdin: &needStdin}
	if p.Tag != "" {
		req.Tag = &p.Tag
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stream, err := s.proc.Start(rctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcError("exec", err)
	}
	defer stream.Close()
	limit := p.MaxOutput
	if limit <= 0 {
		limit = 1 << 20
	}
	res := &agent.ExecResult{}
	var stdout, stderr bytes.Buffer
	add := func(b *bytes.Buffer, d []byte) {
		if int64(b.Len()+len(d)) > limit {
			d = d[:max(0, int(limit)-b.Len())]
			res.Truncated = true
		}
		b.Write(d)
	}
	ended := false
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch {
		case ev.GetStart() != nil:
			res.PID = int(ev.GetStart().GetPid())
			if out != nil {
				out(agent.OutputEvent{Stream: agent.Start, PID: res.PID})
			}
			if p.Stdin != "" {
				if err := s.Stdin(ctx, agent.StdinParams{PID: res.PID, Data: p.Stdin, EOF: !p.KeepStdin}); err != nil {
					return nil, err
				}
			}
		case ev.GetData() != nil:
			d := ev.GetData()
			if o := d.GetStdout(); o != nil {
				add(&stdout, o)
				if out != nil && p.Stream {
					out(agent.OutputEvent{Stream: agent.Stdout, Data: string(o)})
				}
			}
			if e := d.GetStderr(); e != nil {
				add(&stderr, e)
				if out != nil && p.Stream {
					out(agent.OutputEvent{Stream: agent.Stderr, Data: string(e)})
				}
			}
		case ev.GetEnd() != nil:
			end := ev.GetEnd()
			ended = true
			res.ExitCode = int(end.GetExitCode())
			if m := signalStatus.FindStringSubmatch(end.GetStatus()); m != nil {
				res.Signal = m[1]
			}
			if strings.Contains(end.GetError(), "timed out") {
				res.TimedOut = true
			}
		}
	}
	if err := stream.Err(); err != nil && !ended {
		if ctx.Err() == nil && (rctx.Err() != nil || connect.CodeOf(err) == connect.CodeDeadlineExceeded) {
			res.TimedOut = true
			if res.PID != 0 {
				kctx, kcancel := context.WithTimeout(context.Background(), s.p.cfg.ConnectTimeout)
				_ = s.Signal(kctx, agent.SignalParams{PID: res.PID, Signal: "SIGKILL"})
				kcancel()
			}
		} else {
			return nil, rpcError("exec", err)
		}
	}
	// The server may end the process at the deadline just before the
	// client's own deadline fires.
	if !res.TimedOut && res.Signal != "" && (rctx.Err() != nil || time.Since(start) >= timeout) && ctx.Err() == nil {
		res.TimedOut = true
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	res.DurationMs = time.Since(start).Milliseconds()
	return res, nil
}

func pidSelector(pid int) *pb.ProcessSelector {
	return &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: uint32(pid)}}
}

// Signal implements contexts.Sandbox. envd knows SIGTERM and SIGKILL.
func (s *Sandbox) Signal(ctx context.Context, p agent.SignalParams) error {
	s.touch()
	var sig pb.Signal
	switch p.Signal {
	case "SIGKILL", "KILL", "9":
		sig = pb.Signal_SIGNAL_SIGKILL
	case "SIGTERM", "TERM", "15", "":
		sig = pb.Signal_SIGNAL_SIGTERM
	default:
		return fmt.Errorf("signal %s: E2B supports SIGTERM and SIGKILL: %w", p.Signal, errdefs.ErrInvalidArgument)
	}
	_, err := s.proc.SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{Process: pidSelector(p.PID), Signal: sig}))
	return rpcError("signal", err)
}

// Stdin implements contexts.Sandbox.
func (s *Sandbox) Stdin(ctx context.Context, p agent.StdinParams) error {
	s.touch()
	if p.Data != "" {
		_, err := s.proc.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{Process: pidSelector(p.PID),
			Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte(p.Data)}}}))
		if err != nil {
			return rpcError("stdin", err)
		}
	}
	if p.EOF {
		_, err := s.proc.CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{Process: pidSelector(p.PID)}))
		return rpcError("close stdin", err)
	}
	return nil
}

// Processes implements contexts.Sandbox.
func (s *Sandbox) Processes(ctx context.Context) ([]agent.Process, error) {
	s.touch()
	resp, err := s.proc.List(ctx, connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		return nil, rpcError("list processes", err)
	}
	var out []agent.Process
	for _, pi := range resp.Msg.GetProcesses() {
		c := pi.GetConfig()
		out = append(out, agent.Process{PID: int(pi.GetPid()), Argv: append([]string{c.GetCmd()}, c.GetArgs()...), Cwd: c.GetCwd(), Tag: pi.GetTag()})
	}
	return out, nil
}

func fileInfo(e *fspb.EntryInfo) *agent.FileInfo {
	if e == nil {
		return nil
	}
	fi := &agent.FileInfo{Name: e.GetName(), Path: e.GetPath(), Size: e.GetSize(), Mode: e.GetMode() & 0o7777,
		Owner: e.GetOwner(), Group: e.GetGroup(), Target: e.GetSymlinkTarget()}
	if t := e.GetModifiedTime(); t != nil {
		fi.ModTime = t.AsTime().UnixMilli()
	}
	switch e.GetType() {
	case fspb.FileType_FILE_TYPE_FILE:
		fi.Type = "file"
	case fspb.FileType_FILE_TYPE_DIRECTORY:
		fi.Type = "dir"
	case fspb.FileType_FILE_TYPE_SYMLINK:
		fi.Type = "symlink"
	default:
		fi.Type = "other"
	}
	return fi
}

// readAll fetches a whole file with GET /files.
func (s *Sandbox) readAll(ctx context.Context, p string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.envdURL+"/files?"+url.Values{"path": {p}}.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.envd.Do(req)
	if err != nil {
		return nil, transportError(s.envdURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 512<<20))
	if err != nil {
		return nil, transportError(s.envdURL, err)
	}
	if resp.StatusCode >= 300 {
		return nil, sandboxStatusError(resp.StatusCode, b)
	}
	return b, nil
}

// upload writes a whole file with POST /files (octet-stream).
func (s *Sandbox) upload(ctx context.Context, p string, data []byte) (*agent.FileInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.envdURL+"/files?"+url.Values{"path": {p}}.Encode(), bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.envd.Do(req)
	if err != nil {
		return nil, transportError(s.envdURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return nil, sandboxStatusError(resp.StatusCode, b)
	}
	return s.Stat(ctx, p)
}

// ReadFile implements contexts.Sandbox with one ranged GET /files per
// chunk (envd serves Range). A server that ignores Range answers 200 with
// the whole file: the prefix is skipped as it streams and at most one chunk
// is kept.
func (s *Sandbox) ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error) {
	s.touch()
	limit := p.Limit
	if limit <= 0 || limit > agent.ChunkSize {
		limit = agent.ChunkSize
	}
	off := max(p.Offset, 0)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.envdURL+"/files?"+url.Values{"path": {p.Path}}.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+limit-1))
	resp, err := s.envd.Do(req)
	if err != nil {
		return nil, transportError(s.envdURL, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		size, ok := rangeTotal(resp.Header.Get("Content-Range"))
		if !ok {
			return nil, fmt.Errorf("e2b read %s: bad Content-Range %q: %w", p.Path, resp.Header.Get("Content-Range"), errdefs.ErrUnavailable)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return nil, transportError(s.envdURL, err)
		}
		if int64(len(data)) > limit {
			return nil, fmt.Errorf("e2b read %s: the server sent more than the %d bytes asked: %w", p.Path, limit, errdefs.ErrUnavailable)
		}
		return &agent.ReadResult{Data: data, Size: size, EOF: off+int64(len(data)) >= size}, nil
	case http.StatusRequestedRangeNotSatisfiable: // offset at or past the end
		size, ok := rangeTotal(resp.Header.Get("Content-Range"))
		if !ok {
			fi, err := s.Stat(ctx, p.Path)
			if err != nil {
				return nil, err
			}
			size = fi.Size
		}
		return &agent.ReadResult{Data: []byte{}, Size: size, EOF: true}, nil
	case http.StatusOK:
		return s.readPrefixed(ctx, p.Path, resp, off, limit)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return nil, sandboxStatusError(resp.StatusCode, b)
}

// readPrefixed reads [off, off+limit) from a whole-file answer.
func (s *Sandbox) readPrefixed(ctx context.Context, path string, resp *http.Response, off, limit int64) (*agent.ReadResult, error) {
	skipped, err := io.CopyN(io.Discard, resp.Body, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, transportError(s.envdURL, err)
	}
	data := make([]byte, 0, min(limit, max(resp.ContentLength-off, 0)))
	if skipped == off {
		data, err = io.ReadAll(io.LimitReader(resp.Body, limit))
		if err != nil {
			return nil, transportError(s.envdURL, err)
		}
	}
	end := skipped + int64(len(data))
	if resp.ContentLength >= 0 {
		return &agent.ReadResult{Data: data, Size: resp.ContentLength, EOF: end >= resp.ContentLength}, nil
	}
	var one [1]byte
	if n, _ := io.ReadFull(resp.Body, one[:]); n == 0 {
		return &agent.ReadResult{Data: data, Size: end, EOF: true}, nil
	}
	fi, err := s.Stat(ctx, path) // more follows and the length is unknown
	if err != nil {
		return nil, err
	}
	return &agent.ReadResult{Data: data, Size: fi.Size, EOF: false}, nil
}

// rangeTotal parses the complete length of a Content-Range header
// ("bytes 0-99/1234" or "bytes */1234").
func rangeTotal(h string) (int64, bool) {
	_, total, ok := strings.Cut(h, "/")
	if !ok || !strings.HasPrefix(h, "bytes ") {
		return 0, false
	}
	n, err := strconv.ParseInt(total, 10, 64)
	return n, err == nil && n >= 0
}

// WriteFile implements contexts.Sandbox. Offsets and appends read, modify
// and rewrite the file (envd has no partial write); not atomic.
func (s *Sandbox) WriteFile(ctx context.Context, p agent.WriteParams) (*agent.FileInfo, error) {
	s.touch()
	data := p.Data
	if p.Append || p.Offset > 0 {
		old, err := s.readAll(ctx, p.Path)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return nil, err
		}
		if p.Append {
			data = append(old, p.Data...)
		} else {
			if int64(len(old)) < p.Offset {
				old = append(old, make([]byte, p.Offset-int64(len(old)))...)
			}
			data = append(old[:p.Offset:p.Offset], p.Data...)
		}
	}
	return s.upload(ctx, p.Path, data)
}

// EditFile implements contexts.Sandbox as read, replace, write.
func (s *Sandbox) EditFile(ctx context.Context, p agent.EditParams) (*agent.EditResult, error) {
	s.touch()
	b, err := s.readAll(ctx, p.Path)
	if err != nil {
		return nil, err
	}
	n := strings.Count(string(b), p.Old)
	switch {
	case p.Old == "" || n == 0:
		return nil, fmt.Errorf("edit %s: text not found: %w", p.Path, errdefs.ErrNotFound)
	case n > 1 && !p.All:
		return nil, fmt.Errorf("edit %s: text occurs %d times: %w", p.Path, n, errdefs.ErrFailedPrecondition)
	}
	if _, err := s.upload(ctx, p.Path, []byte(strings.ReplaceAll(string(b), p.Old, p.New))); err != nil {
		return nil, err
	}
	return &agent.EditResult{Replacements: n}, nil
}

// List implements contexts.Sandbox.
func (s *Sandbox) List(ctx context.Context, p agent.ListParams) ([]agent.FileInfo, error) {
	s.touch()
	resp, err := s.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: p.Path, Depth: uint32(max(p.Depth, 1))}))
	if err != nil {
		return nil, rpcError("list", err)
	}
	out := []agent.FileInfo{}
	for _, e := range resp.Msg.GetEntries() {
		out = append(out, *fileInfo(e))
	}
	return out, nil
}

// Stat implements contexts.Sandbox.
func (s *Sandbox) Stat(ctx context.Context, p string) (*agent.FileInfo, error) {
	s.touch()
	resp, err := s.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: p}))
	if err != nil {
		return nil, rpcError("stat", err)
	}
	return fileInfo(resp.Msg.GetEntry()), nil
}

// Mkdir implements contexts.Sandbox; an existing directory is fine.
func (s *Sandbox) Mkdir(ctx context.Context, p string) (*agent.FileInfo, error) {
	s.touch()
	resp, err := s.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: p}))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return s.Stat(ctx, p)
	}
	if err != nil {
		return nil, rpcError("mkdir", err)
	}
	return fileInfo(resp.Msg.GetEntry()), nil
}

// Remove implements contexts.Sandbox (envd removes recursively).
func (s *Sandbox) Remove(ctx context.Context, p agent.RemoveParams) error {
	s.touch()
	if !p.Recursive {
		fi, err := s.Stat(ctx, p.Path)
		if err != nil {
			return err
		}
		if fi.Type == "dir" {
			entries, err := s.List(ctx, agent.ListParams{Path: p.Path})
			if err != nil {
				return err
			}
			if len(entries) > 0 {
				return fmt.Errorf("remove %s: directory not empty: %w", p.Path, errdefs.ErrFailedPrecondition)
			}
		}
	}
	_, err := s.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: p.Path}))
	return rpcError("remove", err)
}

// Move implements contexts.Sandbox.
func (s *Sandbox) Move(ctx context.Context, p agent.MoveParams) (*agent.FileInfo, error) {
	s.touch()
	resp, err := s.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: p.From, Destination: p.To}))
	if err != nil {
		return nil, rpcError("move", err)
	}
	return fileInfo(resp.Msg.GetEntry()), nil
}

// Glob implements contexts.Sandbox over a deep ListDir.
func (s *Sandbox) Glob(ctx context.Context, p agent.GlobParams) (*agent.GlobResult, error) {
	root := p.Root
	if root == "" {
		root = "/home/user"
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	entries, err := s.List(ctx, agent.ListParams{Path: root, Depth: 32})
	if err != nil {
		return nil, err
	}
	re, err := globRegexp(p.Pattern)
	if err != nil {
		return nil, err
	}
	res := &agent.GlobResult{Paths: []string{}}
	for _, e := range entries {
		rel := strings.TrimPrefix(strings.TrimPrefix(e.Path, root), "/")
		if re.MatchString(rel) {
			if len(res.Paths) == limit {
				res.Truncated = true
				break
			}
			res.Paths = append(res.Paths, e.Path)
		}
	}
	return res, nil
}

// globRegexp turns a glob with ** into a regexp over slash paths.
func globRegexp(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '*' && i+1 < len(pattern) && pattern[i+1] == '*':
			i++
			if i+1 < len(pattern) && pattern[i+1] == '/' {
				i++
				b.WriteString("(?:.*/)?")
			} else {
				b.WriteString(".*")
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("glob %q: %w", pattern, errdefs.ErrInvalidArgument)
	}
	return re, nil
}

// Grep implements contexts.Sandbox with grep -E in the sandbox (POSIX ERE,
// close to but not exactly RE2).
func (s *Sandbox) Grep(ctx context.Context, p agent.GrepParams) (*agent.GrepResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	where := p.Path
	if where == "" {
		where = "/home/user"
	}
	argv := []string{"grep", "-rnIE"}
	if p.IgnoreCase {
		argv[1] = "-rniIE"
	}
	if p.Glob != "" {
		argv = append(argv, "--include="+p.Glob)
	}
	argv = append(argv, "--", p.Pattern, where)
	res, err := s.Exec(ctx, agent.ExecParams{Argv: argv, TimeoutMs: 60000}, nil)
	if err != nil {
		return nil, err
	}
	if res.ExitCode > 1 {
		return nil, fmt.Errorf("grep: %s: %w", strings.TrimSpace(res.Stderr), errdefs.ErrInvalidArgument)
	}
	out := &agent.GrepResult{Matches: []agent.GrepMatch{}}
	for _, line := range strings.Split(res.Stdout, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) < 3 {
			continue
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			continue
		}
		if len(out.Matches) == limit {
			out.Truncated = true
			break
		}
		out.Matches = append(out.Matches, agent.GrepMatch{Path: path.Clean(parts[0]), Line: n, Text: parts[2]})
	}
	return out, nil
}
