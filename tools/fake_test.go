package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// fakeContexts runs python code with the host's python3 (one process per
// call, no state) and serves file calls from an in-memory sandbox.
type fakeContexts struct {
	t *testing.T
	// prelude is prepended to python code (e.g. to hide pandas).
	prelude string
	// canned, when set, is returned by Execute instead of running code.
	canned *agent.RunCodeResult

	mu       sync.Mutex
	requests []contexts.ExecuteRequest
	sb       *fakeSandbox
}

var _ Contexts = (*fakeContexts)(nil)

func newFake(t *testing.T) *fakeContexts {
	return &fakeContexts{t: t, sb: &fakeSandbox{files: map[string][]byte{}}}
}

func (f *fakeContexts) Execute(ctx context.Context, id contexts.Identity, req contexts.ExecuteRequest, out contexts.OutputFunc) (*contexts.ExecuteResult, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	res := &contexts.ExecuteResult{SandboxID: "fake-sb", ContextID: "fake-ctx", Identity: id}
	if f.canned != nil {
		res.RunCodeResult = *f.canned
		return res, nil
	}
	if req.Language != agent.Python {
		return nil, fmt.Errorf("fake: language %s: %w", req.Language, errdefs.ErrInvalidArgument)
	}
	res.RunCodeResult = runPython(ctx, f.prelude+req.Code)
	return res, nil
}

// runPython runs code with /usr/bin/python3 and shapes the outcome like a
// kernel result.
func runPython(ctx context.Context, code string) agent.RunCodeResult {
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", "-")
	cmd.Stdin = strings.NewReader(code)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := agent.RunCodeResult{Success: err == nil, Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		last := lines[len(lines)-1]
		name, value, _ := strings.Cut(last, ": ")
		r.Error = &agent.ExecError{Name: name, Value: value, Traceback: stderr.String()}
		r.Stderr = ""
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.ExitCode = ee.ExitCode()
		}
	}
	return r
}

func (f *fakeContexts) Use(ctx context.Context, id contexts.Identity, opts contexts.CreateOptions, fn func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error) error {
	return fn(ctx, &contexts.Record{ID: "fake-ctx", Identity: id, SandboxID: "fake-sb"}, f.sb)
}

// fakeSandbox is an in-memory file system. Methods the tools do not use
// panic through the nil embedded interface.
type fakeSandbox struct {
	contexts.Sandbox
	mu     sync.Mutex
	files  map[string][]byte
	reads  int // ReadFile calls
	writes int // WriteFile calls
	exec   func(p agent.ExecParams) *agent.ExecResult
}

func (s *fakeSandbox) ID() string { return "fake-sb" }

func (s *fakeSandbox) Exec(ctx context.Context, p agent.ExecParams, out contexts.OutputFunc) (*agent.ExecResult, error) {
	if s.exec == nil {
		return nil, fmt.Errorf("fake exec: %w", errdefs.ErrUnavailable)
	}
	return s.exec(p), nil
}

func (s *fakeSandbox) ReadFile(ctx context.Context, p agent.ReadParams) (*agent.ReadResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	data, ok := s.files[p.Path]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p.Path, errdefs.ErrNotFound)
	}
	limit := p.Limit
	if limit <= 0 || limit > agent.ChunkSize {
		limit = agent.ChunkSize
	}
	start := min(p.Offset, int64(len(data)))
	end := min(start+limit, int64(len(data)))
	return &agent.ReadResult{Data: bytes.Clone(data[start:end]), Size: int64(len(data)), EOF: end == int64(len(data))}, nil
}

func (s *fakeSandbox) WriteFile(ctx context.Context, p agent.WriteParams) (*agent.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	switch {
	case p.Append && p.Offset > 0:
		return nil, fmt.Errorf("append and offset exclude each other: %w", errdefs.ErrInvalidArgument)
	case p.Append:
		s.files[p.Path] = append(s.files[p.Path], p.Data...)
	case p.Offset == 0:
		s.files[p.Path] = bytes.Clone(p.Data)
	default:
		old := s.files[p.Path]
		if int64(len(old)) < p.Offset+int64(len(p.Data)) {
			old = append(old, make([]byte, p.Offset+int64(len(p.Data))-int64(len(old)))...)
		}
		copy(old[p.Offset:], p.Data)
		s.files[p.Path] = old
	}
	return &agent.FileInfo{Path: "/home/user/" + strings.TrimPrefix(p.Path, "/home/user/"), Size: int64(len(s.files[p.Path]))}, nil
}

func (s *fakeSandbox) EditFile(ctx context.Context, p agent.EditParams) (*agent.EditResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.files[p.Path]
	if !ok {
		return nil, fmt.Errorf("no such file: %w", errdefs.ErrNotFound)
	}
	n := strings.Count(string(data), p.Old)
	switch {
	case n == 0:
		return nil, fmt.Errorf("old not found: %w", errdefs.ErrNotFound)
	case n > 1 && !p.All:
		return nil, fmt.Errorf("%d matches: %w", n, errdefs.ErrFailedPrecondition)
	}
	s.files[p.Path] = []byte(strings.ReplaceAll(string(data), p.Old, p.New))
	return &agent.EditResult{Replacements: n}, nil
}

func (s *fakeSandbox) Stat(ctx context.Context, path string) (*agent.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if data, ok := s.files[path]; ok {
		return &agent.FileInfo{Path: path, Type: "file", Size: int64(len(data))}, nil
	}
	return nil, fmt.Errorf("%s: %w", path, errdefs.ErrNotFound)
}

func (s *fakeSandbox) List(ctx context.Context, p agent.ListParams) ([]agent.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []agent.FileInfo
	for name, data := range s.files {
		out = append(out, agent.FileInfo{Name: name, Path: name, Type: "file", Size: int64(len(data))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *fakeSandbox) Glob(ctx context.Context, p agent.GlobParams) (*agent.GlobResult, error) {
	return &agent.GlobResult{Paths: []string{p.Root + "|" + p.Pattern}}, nil
}

func (s *fakeSandbox) Grep(ctx context.Context, p agent.GrepParams) (*agent.GrepResult, error) {
	return &agent.GrepResult{Matches: []agent.GrepMatch{{Path: "a.txt", Line: 1, Text: strings.Repeat("x", 3000)}}}, nil
}
