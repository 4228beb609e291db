package contextstest

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// Sandbox is a fake contexts.Sandbox: a handle on a fake box. Files live
// in a map; Exec echoes its command line; RunCode calls Provider.Run.
type Sandbox struct {
	p      *Provider
	b      *box
	closed atomic.Bool
}

var _ contexts.Sandbox = (*Sandbox)(nil)

var errDead = fmt.Errorf("fake sandbox: connection lost")

func (s *Sandbox) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("fake sandbox %s: connection closed", s.b.id)
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.b.dead {
		return errDead
	}
	if s.b.paused {
		return fmt.Errorf("fake sandbox %s is paused: %w", s.b.id, errdefs.ErrUnavailable)
	}
	return nil
}

// ID implements contexts.Sandbox.
func (s *Sandbox) ID() string { return s.b.id }

// Spec returns the spec the sandbox was created with.
func (s *Sandbox) Spec() contexts.Spec { return s.b.spec }

// Var returns a variable set by Echo's "name = value" lines.
func (s *Sandbox) Var(name string) (string, bool) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	v, ok := s.b.vars[name]
	return v, ok
}

// SetVar sets a kernel variable (for custom RunFuncs).
func (s *Sandbox) SetVar(name, value string) {
	s.b.mu.Lock()
	s.b.vars[name] = value
	s.b.mu.Unlock()
}

// Runs returns how many RunCode calls the sandbox served.
func (s *Sandbox) Runs() int {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.b.runs
}

// Ping implements contexts.Sandbox.
func (s *Sandbox) Ping(ctx context.Context) error { return s.check(ctx) }

var assign = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$`)

var printCall = regexp.MustCompile(`^\s*print\((.*)\)\s*$`)

// Echo is the default RunFunc, a tiny line interpreter with state:
// "name = value" assigns, "print(name)" prints a variable (NameError when
// undefined), "print('text')" prints text, "raise X" fails with error X,
// "sleep N" (milliseconds) sleeps honouring ctx and the call's timeout
// (TimedOut when it passes); any other line is echoed to stdout. Output is
// streamed when out is not nil.
func Echo(ctx context.Context, sb *Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
	res := &agent.RunCodeResult{Success: true}
	emit := func(stream, s string) {
		if stream == agent.Stdout {
			res.Stdout += s
		} else {
			res.Stderr += s
		}
		if out != nil {
			out(agent.OutputEvent{Stream: stream, Data: s})
		}
	}
	for _, line := range strings.Split(p.Code, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if m := assign.FindStringSubmatch(line); m != nil {
			sb.SetVar(m[1], strings.Trim(m[2], `"'`))
			continue
		}
		if m := printCall.FindStringSubmatch(line); m != nil {
			arg := strings.TrimSpace(m[1])
			if strings.HasPrefix(arg, "'") || strings.HasPrefix(arg, `"`) {
				emit(agent.Stdout, strings.Trim(arg, `"'`)+"\n")
				continue
			}
			v, ok := sb.Var(arg)
			if !ok {
				res.Success = false
				res.Error = &agent.ExecError{Name: "NameError", Value: fmt.Sprintf("name '%s' is not defined", arg),
					Traceback: "NameError: name '" + arg + "' is not defined"}
				return res, nil
			}
			emit(agent.Stdout, v+"\n")
			continue
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "raise "); ok {
			res.Success = false
			res.Error = &agent.ExecError{Name: rest, Value: rest + " raised", Traceback: "Traceback: " + rest}
			return res, nil
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "sleep "); ok {
			var ms int
			fmt.Sscan(rest, &ms)
			d := time.Duration(ms) * time.Millisecond
			limit := time.Duration(p.TimeoutMs) * time.Millisecond
			if limit > 0 && d > limit {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(limit):
				}
				res.Success, res.TimedOut = false, true
				res.Error = &agent.ExecError{Name: "TimeoutError", Value: "execution timed out"}
				return res, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d):
			}
			continue
		}
		emit(agent.Stdout, line+"\n")
	}
	return res, nil
}

// RunCode implements contexts.Sandbox.
func (s *Sandbox) RunCode(ctx context.Context, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.b.mu.Lock()
	s.b.runs++
	n := s.b.runs
	s.b.mu.Unlock()
	run := s.p.Run
	if run == nil {
		run = Echo
	}
	res, err := run(ctx, s, p, out)
	if res != nil {
		res.ExecutionCount = n
	}
	return res, err
}

// RestartKernel implements contexts.Sandbox; it clears the variables.
func (s *Sandbox) RestartKernel(ctx context.Context, p agent.KernelParams) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	s.b.mu.Lock()
	s.b.vars = map[string]string{}
	s.b.mu.Unlock()
	return nil
}

// Exec implements contexts.Sandbox: it echoes the command line (Shell, or
// Argv joined) to stdout, streamed when out is set.
func (s *Sandbox) Exec(ctx context.Context, p agent.ExecParams, out contexts.OutputFunc) (*agent.ExecResult, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	line := p.Shell
	if line == "" {
		line = strings.Join(p.Argv, " ")
	}
	if out != nil {
		out(agent.OutputEvent{Stream: agent.Start, PID: 100})
		out(agent.OutputEvent{Stream: agent.Stdout, Data: line + "\n"})
	}
	return &agent.ExecResult{PID: 100, Stdout: line + "\n"}, nil
}

// Signal implements contexts.Sandbox.
func (s *Sandbox) Signal(ctx context.Context, p agent.SignalParams) error { return s.check(ctx) }

// Stdin implements contexts.Sandbox.
func (s *Sandbox) Stdin(ctx context.Context, p agent.StdinParams) error { return s.check(ctx) }

// Processes implements contexts.Sandbox (always empty).
func (s *Sandbox) Processes(ctx context.Context) ([]agent.Process, error) {
	return nil, s.check(ctx)
}

func abs(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/home/user/" + p
	}
	return path.Clean(p)
}

func (s *Sandbox) info(p string, data []byte) *agent.FileInfo {
	return &agent.FileInfo{Name: path.Base(p), Path: p, Type: "file", Size: int64(len(data)), Mode: 0o644}
}

// ReadFile implements contexts.Sandbox.
func (s *Sandbox) ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	data, ok := s.b.files[abs(p.Path)]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p.Path, errdefs.ErrNotFound)
	}
	off := min(p.Offset, int64(len(data)))
	end := int64(len(data))
	if p.Limit > 0 {
		end = min(end, off+p.Limit)
	}
	return &agent.ReadResult{Data: append([]byte(nil), data[off:end]...), Size: int64(len(data)), EOF: end == int64(len(data))}, nil
}

// WriteFile implements contexts.Sandbox.
func (s *Sandbox) WriteFile(ctx context.Context, p agent.WriteParams) (*agent.FileInfo, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	fp := abs(p.Path)
	data := p.Data
	if p.Append {
		data = append(append([]byte(nil), s.b.files[fp]...), p.Data...)
	}
	s.b.files[fp] = append([]byte(nil), data...)
	return s.info(fp, data), nil
}

// EditFile implements contexts.Sandbox.
func (s *Sandbox) EditFile(ctx context.Context, p agent.EditParams) (*agent.EditResult, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	fp := abs(p.Path)
	data, ok := s.b.files[fp]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p.Path, errdefs.ErrNotFound)
	}
	n := strings.Count(string(data), p.Old)
	switch {
	case n == 0:
		return nil, fmt.Errorf("%q not found in %s: %w", p.Old, p.Path, errdefs.ErrNotFound)
	case n > 1 && !p.All:
		return nil, fmt.Errorf("%q occurs %d times in %s: %w", p.Old, n, p.Path, errdefs.ErrFailedPrecondition)
	}
	s.b.files[fp] = []byte(strings.ReplaceAll(string(data), p.Old, p.New))
	return &agent.EditResult{Replacements: n}, nil
}

// List implements contexts.Sandbox: the files directly under p.Path.
func (s *Sandbox) List(ctx context.Context, p agent.ListParams) ([]agent.FileInfo, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	dir := abs(p.Path)
	var out []agent.FileInfo
	for fp, data := range s.b.files {
		if path.Dir(fp) == dir {
			out = append(out, *s.info(fp, data))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Stat implements contexts.Sandbox.
func (s *Sandbox) Stat(ctx context.Context, p string) (*agent.FileInfo, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	data, ok := s.b.files[abs(p)]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p, errdefs.ErrNotFound)
	}
	return s.info(abs(p), data), nil
}

// Mkdir implements contexts.Sandbox (directories are implicit).
func (s *Sandbox) Mkdir(ctx context.Context, p string) (*agent.FileInfo, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return &agent.FileInfo{Name: path.Base(abs(p)), Path: abs(p), Type: "dir", Mode: 0o755}, nil
}

// Remove implements contexts.Sandbox.
func (s *Sandbox) Remove(ctx context.Context, p agent.RemoveParams) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	delete(s.b.files, abs(p.Path))
	return nil
}

// Move implements contexts.Sandbox.
func (s *Sandbox) Move(ctx context.Context, p agent.MoveParams) (*agent.FileInfo, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	from, to := abs(p.From), abs(p.To)
	data, ok := s.b.files[from]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p.From, errdefs.ErrNotFound)
	}
	delete(s.b.files, from)
	s.b.files[to] = data
	return s.info(to, data), nil
}

// Glob implements contexts.Sandbox with path.Match on whole paths.
func (s *Sandbox) Glob(ctx context.Context, p agent.GlobParams) (*agent.GlobResult, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	pat := p.Pattern
	if !strings.HasPrefix(pat, "/") {
		root := "/home/user"
		if p.Root != "" {
			root = abs(p.Root)
		}
		pat = root + "/" + pat
	}
	res := &agent.GlobResult{}
	for fp := range s.b.files {
		if ok, _ := path.Match(pat, fp); ok {
			res.Paths = append(res.Paths, fp)
		}
	}
	sort.Strings(res.Paths)
	return res, nil
}

// Grep implements contexts.Sandbox over every file.
func (s *Sandbox) Grep(ctx context.Context, p agent.GrepParams) (*agent.GrepResult, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	pat := p.Pattern
	if p.IgnoreCase {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, fmt.Errorf("pattern: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	var paths []string
	for fp := range s.b.files {
		paths = append(paths, fp)
	}
	sort.Strings(paths)
	res := &agent.GrepResult{}
	for _, fp := range paths {
		for i, line := range strings.Split(string(s.b.files[fp]), "\n") {
			if re.MatchString(line) {
				res.Matches = append(res.Matches, agent.GrepMatch{Path: fp, Line: i + 1, Text: line})
			}
		}
	}
	return res, nil
}

// Close implements contexts.Sandbox: the handle stops working, the box
// keeps running.
func (s *Sandbox) Close() error {
	s.closed.Store(true)
	return nil
}

// SetEnv records variables added to the sandbox's environment after it
// started (the agent's env.set).
func (s *Sandbox) SetEnv(ctx context.Context, env map[string]string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.b.added == nil {
		s.b.added = map[string]string{}
	}
	for k, v := range env {
		s.b.added[k] = v
	}
	return nil
}

// Env is the sandbox's environment: its spec's, with what SetEnv added.
func (s *Sandbox) Env() map[string]string {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.b.spec.Env {
		out[k] = v
	}
	for k, v := range s.b.added {
		out[k] = v
	}
	return out
}
