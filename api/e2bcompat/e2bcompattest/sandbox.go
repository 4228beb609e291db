// Package e2bcompattest holds what the tests of the E2B surface and of the
// e2b provider share: a hand-written fake sandbox and a provider of them,
// which the real contexts.Manager runs over the memory store (Env), fake
// tenants, and a bound on a test's memory growth. The fake sandbox keeps
// files in memory, runs Exec as a real host process (bash) and answers
// RunCode with a scripted echo; it is no substitute for the real agent in
// the tests that matter (e2e/e2b).
package e2bcompattest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Sandbox is a fake contexts.Sandbox.
type Sandbox struct {
	id   string
	env  map[string]string
	dead atomic.Bool // destroyed (Provider.Destroy): every call fails

	mu     sync.Mutex
	files  map[string][]byte // absolute path -> content
	dirs   map[string]bool   // absolute directories
	procs  map[int]*exec.Cmd // running execs
	stdinW map[int]writeCloser
	count  int
}

var _ contexts.Sandbox = (*Sandbox)(nil)

// NewSandbox returns a fake sandbox with /home/user.
func NewSandbox(id string, env map[string]string) *Sandbox {
	return &Sandbox{id: id, env: env, files: map[string][]byte{}, dirs: map[string]bool{"/": true, "/home": true, "/home/user": true},
		procs: map[int]*exec.Cmd{}, stdinW: map[int]writeCloser{}}
}

func abs(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/home/user/" + p
	}
	return path.Clean(p)
}

func (s *Sandbox) ID() string   { return s.id }
func (s *Sandbox) Close() error { return nil }

// Ping implements contexts.Sandbox: it fails once the sandbox was
// destroyed.
func (s *Sandbox) Ping(ctx context.Context) error { return s.check() }

// errLost is what a destroyed sandbox's calls answer, as the agent's
// connection does when its sandbox is gone.
var errLost = fmt.Errorf("fake sandbox: connection lost: %w", errdefs.ErrUnavailable)

func (s *Sandbox) check() error {
	if s.dead.Load() {
		return errLost
	}
	return nil
}

// destroy ends the sandbox: its processes are killed (their process
// groups, so a child holding the output pipe goes too) and every later
// call fails.
func (s *Sandbox) destroy() {
	s.dead.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.procs {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}

// RunCode echoes: stdout gets "out:<code>", the main result is the code;
// code starting with "raise" yields an error, "sleep" sleeps 200 ms, and
// "chunks:a|b" streams a and b as separate stdout chunks.
func (s *Sandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if p.Language == agent.R || p.Language == agent.Java {
		// as the agent answers on an image without R and Java
		return nil, fmt.Errorf("no %s kernel: not installed in this sandbox: %w", p.Language, errdefs.ErrFailedPrecondition)
	}
	if p.Language != agent.Python && p.Language != agent.JavaScript && p.Language != agent.Bash && p.Language != agent.TypeScript {
		return nil, fmt.Errorf("language %q: %w", p.Language, errdefs.ErrInvalidArgument)
	}
	s.mu.Lock()
	s.count++
	n := s.count
	s.mu.Unlock()
	res := &agent.RunCodeResult{Success: true, ExecutionCount: n, Stdout: "out:" + p.Code + "\n"}
	if chunks, ok := strings.CutPrefix(p.Code, "chunks:"); ok {
		// "chunks:a|b\n|c" streams a, b\n and c as separate chunks.
		res.Stdout = strings.ReplaceAll(chunks, "|", "")
		for _, c := range strings.Split(chunks, "|") {
			if out != nil {
				out(agent.OutputEvent{Stream: agent.Stdout, Data: c})
			}
		}
		return res, nil
	}
	if out != nil {
		out(agent.OutputEvent{Stream: agent.Stdout, Data: res.Stdout})
	}
	if strings.HasPrefix(p.Code, "raise") {
		res.Success = false
		res.Error = &agent.ExecError{Name: "ValueError", Value: "boom", Traceback: "Traceback...\nValueError: boom"}
		return res, nil
	}
	if strings.HasPrefix(p.Code, "sleep") {
		time.Sleep(200 * time.Millisecond)
	}
	res.Results = []agent.RichResult{{Main: true, Text: p.Code + "@" + p.Kernel}}
	return res, nil
}

func (s *Sandbox) RestartKernel(ctx context.Context, p agent.KernelParams) error { return nil }

// Exec runs p on the host with bash.
func (s *Sandbox) Exec(ctx context.Context, p agent.ExecParams, out contexts.OutputFunc) (*agent.ExecResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	argv := p.Argv
	if p.Shell != "" {
		argv = []string{"/bin/bash", "-c", p.Shell}
	}
	if p.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(p.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// A group of its own: destroy kills the children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for k, v := range s.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range p.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH=/usr/bin:/bin")
	var stdout, stderr bytes.Buffer
	limit := p.MaxOutput
	if limit <= 0 {
		limit = 1 << 20 // the agent's default: output past it is streamed, not kept
	}
	var truncated atomic.Bool // stdout and stderr are copied concurrently
	// Output waits for the start event, as the agent sends them: exec's
	// copying goroutines may read the first output before Start returns.
	started := make(chan struct{})
	emit := func(stream string, buf *bytes.Buffer) *writerFunc {
		return &writerFunc{fn: func(b []byte) {
			<-started
			if keep := limit - int64(buf.Len()); keep < int64(len(b)) {
				buf.Write(b[:max(keep, 0)])
				truncated.Store(true)
			} else {
				buf.Write(b)
			}
			if out != nil {
				out(agent.OutputEvent{Stream: stream, Data: string(b)})
			}
		}}
	}
	cmd.Stdout, cmd.Stderr = emit(agent.Stdout, &stdout), emit(agent.Stderr, &stderr)
	var stdinW interface{ Close() error }
	if p.KeepStdin {
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdinW = w
		defer w.Close()
	} else {
		cmd.Stdin = strings.NewReader(p.Stdin)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		close(started)
		return nil, fmt.Errorf("start: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	pid := cmd.Process.Pid
	s.mu.Lock()
	s.procs[pid] = cmd
	s.mu.Unlock()
	if stdinW != nil {
		s.mu.Lock()
		s.stdinW[pid] = stdinW.(writeCloser)
		s.mu.Unlock()
	}
	if out != nil {
		out(agent.OutputEvent{Stream: agent.Start, PID: pid})
	}
	close(started)
	err := cmd.Wait()
	s.mu.Lock()
	delete(s.procs, pid)
	delete(s.stdinW, pid)
	s.mu.Unlock()
	res := &agent.ExecResult{PID: pid, Stdout: stdout.String(), Stderr: stderr.String(), Truncated: truncated.Load(), DurationMs: time.Since(start).Milliseconds()}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		res.Signal = st.Signal().String()
		res.ExitCode = -1
	} else if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		res.TimedOut = true
	}
	_ = err
	if err := s.check(); err != nil {
		return nil, err // killed with its sandbox: the connection is gone
	}
	return res, nil
}

type writeCloser interface {
	Write([]byte) (int, error)
	Close() error
}

type writerFunc struct{ fn func([]byte) }

func (w *writerFunc) Write(b []byte) (int, error) {
	w.fn(append([]byte(nil), b...))
	return len(b), nil
}

func (s *Sandbox) Signal(ctx context.Context, p agent.SignalParams) error {
	s.mu.Lock()
	cmd := s.procs[p.PID]
	s.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("process %d: %w", p.PID, errdefs.ErrNotFound)
	}
	sig := syscall.SIGTERM
	if p.Signal == "SIGKILL" {
		sig = syscall.SIGKILL
	}
	return cmd.Process.Signal(sig)
}

func (s *Sandbox) Stdin(ctx context.Context, p agent.StdinParams) error {
	s.mu.Lock()
	w := s.stdinW[p.PID]
	s.mu.Unlock()
	if w == nil {
		return fmt.Errorf("process %d: %w", p.PID, errdefs.ErrNotFound)
	}
	if p.Data != "" {
		if _, err := w.Write([]byte(p.Data)); err != nil {
			return err
		}
	}
	if p.EOF {
		return w.Close()
	}
	return nil
}

func (s *Sandbox) Processes(ctx context.Context) ([]agent.Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []agent.Process
	for pid, c := range s.procs {
		out = append(out, agent.Process{PID: pid, Argv: c.Args})
	}
	return out, nil
}

func (s *Sandbox) info(p string) *agent.FileInfo {
	if s.dirs[p] {
		return &agent.FileInfo{Name: path.Base(p), Path: p, Type: "dir", Mode: 0o755, ModTime: time.Now().UnixMilli()}
	}
	if b, ok := s.files[p]; ok {
		return &agent.FileInfo{Name: path.Base(p), Path: p, Type: "file", Size: int64(len(b)), Mode: 0o644, ModTime: time.Now().UnixMilli()}
	}
	return nil
}

func (s *Sandbox) ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[abs(p.Path)]
	if !ok {
		return nil, fmt.Errorf("file %s: %w", p.Path, errdefs.ErrNotFound)
	}
	limit := p.Limit
	if limit == 0 || limit > agent.ChunkSize {
		limit = agent.ChunkSize
	}
	end := min(p.Offset+limit, int64(len(b)))
	return &agent.ReadResult{Data: append([]byte(nil), b[min(p.Offset, end):end]...), Size: int64(len(b)), EOF: end == int64(len(b))}, nil
}

func (s *Sandbox) mkdirs(p string) {
	for d := p; d != "/"; d = path.Dir(d) {
		s.dirs[d] = true
	}
}

func (s *Sandbox) WriteFile(ctx context.Context, p agent.WriteParams) (*agent.FileInfo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ap := abs(p.Path)
	if s.dirs[ap] {
		return nil, fmt.Errorf("%s is a directory: %w", ap, errdefs.ErrInvalidArgument)
	}
	s.mkdirs(path.Dir(ap))
	if p.Append {
		s.files[ap] = append(s.files[ap], p.Data...)
	} else {
		s.files[ap] = append([]byte(nil), p.Data...)
	}
	return s.info(ap), nil
}

func (s *Sandbox) EditFile(ctx context.Context, p agent.EditParams) (*agent.EditResult, error) {
	return nil, fmt.Errorf("edit: %w", errdefs.ErrInvalidArgument)
}

func (s *Sandbox) List(ctx context.Context, p agent.ListParams) ([]agent.FileInfo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := abs(p.Path)
	if !s.dirs[dir] {
		return nil, fmt.Errorf("dir %s: %w", dir, errdefs.ErrNotFound)
	}
	var out []agent.FileInfo
	add := func(name string) {
		if path.Dir(name) == dir && name != dir {
			out = append(out, *s.info(name))
		}
	}
	for d := range s.dirs {
		add(d)
	}
	for f := range s.files {
		add(f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (s *Sandbox) Stat(ctx context.Context, p string) (*agent.FileInfo, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fi := s.info(abs(p)); fi != nil {
		return fi, nil
	}
	return nil, fmt.Errorf("path %s: %w", p, errdefs.ErrNotFound)
}

func (s *Sandbox) Mkdir(ctx context.Context, p string) (*agent.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mkdirs(abs(p))
	return s.info(abs(p)), nil
}

func (s *Sandbox) Remove(ctx context.Context, p agent.RemoveParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ap := abs(p.Path)
	if s.info(ap) == nil {
		return fmt.Errorf("path %s: %w", p.Path, errdefs.ErrNotFound)
	}
	delete(s.files, ap)
	for d := range s.dirs {
		if d == ap || strings.HasPrefix(d, ap+"/") {
			delete(s.dirs, d)
		}
	}
	for f := range s.files {
		if strings.HasPrefix(f, ap+"/") {
			delete(s.files, f)
		}
	}
	return nil
}

func (s *Sandbox) Move(ctx context.Context, p agent.MoveParams) (*agent.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, to := abs(p.From), abs(p.To)
	b, ok := s.files[from]
	if !ok {
		return nil, fmt.Errorf("path %s: %w", p.From, errdefs.ErrNotFound)
	}
	delete(s.files, from)
	s.mkdirs(path.Dir(to))
	s.files[to] = b
	return s.info(to), nil
}

func (s *Sandbox) Glob(ctx context.Context, p agent.GlobParams) (*agent.GlobResult, error) {
	return &agent.GlobResult{}, nil
}

func (s *Sandbox) Grep(ctx context.Context, p agent.GrepParams) (*agent.GrepResult, error) {
	return &agent.GrepResult{}, nil
}
