// Package e2bcompattest holds hand-written fakes of the Manager and of a
// sandbox for unit tests of the E2B surface and of the e2b provider. The
// fake sandbox keeps files in memory, runs Exec as a real host process
// (bash) and answers RunCode with a scripted echo; it is no substitute for
// the real manager and agent in the tests that matter.
package e2bcompattest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/tenant"
)

// Manager is a fake e2bcompat.Manager.
type Manager struct {
	mu      sync.Mutex
	recs    map[string]*contexts.Record
	sbs     map[string]*Sandbox
	Creates int
	TTL     time.Duration // default TTL; 0: 5 min
	// NoTenant lists the calls (by method) whose context did not carry
	// the authenticated tenant (tenant.From), which the guard reads the
	// tenant's mode from.
	NoTenant []string
	// Prestarts is each create's CreateOptions.Prestart, in order.
	Prestarts [][]string
	// Clock is the manager's clock; nil: time.Now.
	Clock func() time.Time
}

// Now implements e2bcompat.Manager.
func (m *Manager) Now() time.Time {
	if m.Clock != nil {
		return m.Clock()
	}
	return time.Now()
}

// checkTenant records a call whose ctx lacks the authenticated tenant.
func (m *Manager) checkTenant(ctx context.Context, method string) {
	if _, ok := tenant.From(ctx); !ok {
		m.mu.Lock()
		m.NoTenant = append(m.NoTenant, method)
		m.mu.Unlock()
	}
}

var _ e2bcompat.Manager = (*Manager)(nil)

// NewManager returns an empty fake manager.
func NewManager() *Manager {
	return &Manager{recs: map[string]*contexts.Record{}, sbs: map[string]*Sandbox{}}
}

func (m *Manager) activeLocked(id contexts.Identity) *contexts.Record {
	for _, r := range m.recs {
		if r.Identity == id && r.State.Active() {
			return r
		}
	}
	return nil
}

// GetOrCreate implements e2bcompat.Manager.
func (m *Manager) GetOrCreate(ctx context.Context, id contexts.Identity, opts e2bcompat.CreateOptions) (*contexts.Record, error) {
	m.checkTenant(ctx, "GetOrCreate")
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := contexts.CheckMetadata(opts.Metadata); err != nil {
		return nil, err
	}
	if r := m.activeLocked(id); r != nil {
		return r.Clone(), nil
	}
	if opts.Template == "missing" {
		return nil, fmt.Errorf("template %q: %w", opts.Template, errdefs.ErrNotFound)
	}
	ttl := opts.TTL
	if ttl == 0 {
		ttl = m.TTL
	}
	if ttl == 0 {
		ttl = 5 * time.Minute
	}
	now := m.Now()
	r := &contexts.Record{ID: uuid.NewString(), Identity: id, State: contexts.StateReady, Provider: "fake",
		Template: opts.Template, CreatedAt: now, LastUsedAt: now, ExpiresAt: now.Add(ttl), Metadata: maps.Clone(opts.Metadata),
		Lifecycle: contexts.Lifecycle{AutoPause: opts.AutoPause, AutoResume: opts.AutoResume, FixedExpiry: opts.FixedExpiry,
			MaxExecutions: opts.MaxExecutions, Network: opts.Network, TemplateName: opts.TemplateName}}
	r.SandboxID = "fake-" + r.ID
	m.recs[r.ID] = r
	m.sbs[r.ID] = NewSandbox(r.SandboxID, opts.Env)
	m.Prestarts = append(m.Prestarts, opts.Prestart)
	m.Creates++
	return r.Clone(), nil
}

// Execute implements e2bcompat.Manager.
func (m *Manager) Execute(ctx context.Context, id contexts.Identity, req e2bcompat.ExecuteRequest, out contexts.OutputFunc) (*e2bcompat.ExecuteResult, error) {
	m.checkTenant(ctx, "Execute")
	var res *e2bcompat.ExecuteResult
	err := m.Use(ctx, id, e2bcompat.CreateOptions{ContextID: req.ContextID}, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		r, err := sb.RunCode(ctx, agent.RunCodeParams{Language: req.Language, Code: req.Code, Kernel: req.Kernel, Env: req.Env, Stream: out != nil}, out)
		if err != nil {
			return err
		}
		res = &e2bcompat.ExecuteResult{RunCodeResult: *r, ContextID: rec.ID, SandboxID: rec.SandboxID, Identity: rec.Identity}
		return nil
	})
	return res, err
}

// Use implements e2bcompat.Manager (creating the context when absent,
// unless opts.ContextID confines it to a context).
func (m *Manager) Use(ctx context.Context, id contexts.Identity, opts e2bcompat.CreateOptions, fn func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error) error {
	m.checkTenant(ctx, "Use")
	if opts.ContextID != "" {
		m.mu.Lock()
		r := m.activeLocked(id)
		m.mu.Unlock()
		if r == nil || r.ID != opts.ContextID {
			return fmt.Errorf("context %s is not active: %w", opts.ContextID, errdefs.ErrNotFound)
		}
	}
	rec, err := m.GetOrCreate(ctx, id, opts)
	if err != nil {
		return err
	}
	m.mu.Lock()
	sb := m.sbs[rec.ID]
	m.mu.Unlock()
	return fn(ctx, rec, sb)
}

// Get implements e2bcompat.Manager.
func (m *Manager) Get(ctx context.Context, tenantID, contextID string) (*contexts.Record, error) {
	m.checkTenant(ctx, "Get")
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[contextID]
	if !ok || r.TenantID != tenantID {
		return nil, fmt.Errorf("context %s: %w", contextID, errdefs.ErrNotFound)
	}
	return r.Clone(), nil
}

// List implements e2bcompat.Manager: ordered by ID, paged by After.
func (m *Manager) List(ctx context.Context, f contexts.Filter) ([]*contexts.Record, error) {
	m.checkTenant(ctx, "List")
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*contexts.Record
	for _, r := range m.recs {
		if f.TenantID != "" && r.TenantID != f.TenantID || f.ConversationID != "" && r.ConversationID != f.ConversationID ||
			f.PathID != "" && r.PathID != f.PathID || f.After != "" && r.ID <= f.After {
			continue
		}
		if len(f.States) > 0 {
			ok := false
			for _, s := range f.States {
				ok = ok || s == r.State
			}
			if !ok {
				continue
			}
		}
		ok := true
		for k, v := range f.Metadata {
			ok = ok && r.Metadata[k] == v
		}
		if ok {
			out = append(out, r.Clone())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Terminate implements e2bcompat.Manager.
func (m *Manager) Terminate(ctx context.Context, tenantID, contextID string, reason contexts.Reason) error {
	m.checkTenant(ctx, "Terminate")
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[contextID]
	if !ok || r.TenantID != tenantID {
		return fmt.Errorf("context %s: %w", contextID, errdefs.ErrNotFound)
	}
	if r.State.Active() {
		now := m.Now()
		r.State, r.Reason, r.TerminatedAt = contexts.StateTerminated, reason, &now
	}
	return nil
}

// SetTTL implements e2bcompat.Manager.
func (m *Manager) SetTTL(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*contexts.Record, error) {
	m.checkTenant(ctx, "SetTTL")
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[contextID]
	if !ok || r.TenantID != tenantID || !r.State.Active() {
		return nil, fmt.Errorf("context %s: %w", contextID, errdefs.ErrNotFound)
	}
	r.ExpiresAt = m.Now().Add(ttl)
	return r.Clone(), nil
}

// Pause implements e2bcompat.Manager: the record is marked paused (the
// fake sandbox keeps running; the handler refuses its calls).
func (m *Manager) Pause(ctx context.Context, tenantID, contextID string, keep time.Duration) (*contexts.Record, error) {
	m.checkTenant(ctx, "Pause")
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[contextID]
	if !ok || r.TenantID != tenantID || !r.State.Active() {
		return nil, fmt.Errorf("context %s: %w", contextID, errdefs.ErrNotFound)
	}
	if r.Paused() {
		return nil, fmt.Errorf("context %s: %w", contextID, contexts.ErrPaused)
	}
	now := m.Now().UTC()
	r.PausedAt = &now
	r.ExpiresAt = now.Add(keep)
	return r.Clone(), nil
}

// Resume implements e2bcompat.Manager.
func (m *Manager) Resume(ctx context.Context, tenantID, contextID string, ttl time.Duration) (*contexts.Record, error) {
	m.checkTenant(ctx, "Resume")
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[contextID]
	if !ok || r.TenantID != tenantID || !r.State.Active() {
		return nil, fmt.Errorf("context %s: %w", contextID, errdefs.ErrNotFound)
	}
	if !r.Paused() {
		return nil, fmt.Errorf("context %s: %w", contextID, contexts.ErrNotPaused)
	}
	r.PausedAt = nil
	r.ExpiresAt = m.Now().Add(ttl)
	return r.Clone(), nil
}

// AutoPause implements e2bcompat.Manager.
func (m *Manager) AutoPause(ctx context.Context, tenantID, contextID string) (*contexts.Record, error) {
	rec, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return nil, err
	}
	if rec.AutoPause <= 0 || rec.Paused() || rec.ExpiresAt.After(m.Now()) {
		return rec, nil
	}
	return m.Pause(ctx, tenantID, contextID, rec.AutoPause)
}

// Sandbox is a fake contexts.Sandbox.
type Sandbox struct {
	id  string
	env map[string]string

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

func (s *Sandbox) ID() string                     { return s.id }
func (s *Sandbox) Ping(ctx context.Context) error { return nil }
func (s *Sandbox) Close() error                   { return nil }

// RunCode echoes: stdout gets "out:<code>", the main result is the code;
// code starting with "raise" yields an error, "sleep" sleeps 200 ms, and
// "chunks:a|b" streams a and b as separate stdout chunks.
func (s *Sandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
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

// Usage implements e2bcompat.Manager: the record's usage (SetUsage).
func (m *Manager) Usage(ctx context.Context, tenantID, contextID string) (contexts.ResourceUsage, error) {
	r, err := m.Get(ctx, tenantID, contextID)
	if err != nil {
		return contexts.ResourceUsage{}, err
	}
	return r.ResourceUsage, nil
}

// SetUsage sets what Usage reports for a context.
func (m *Manager) SetUsage(contextID string, u contexts.ResourceUsage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recs[contextID]; ok {
		r.ResourceUsage = u
	}
}
