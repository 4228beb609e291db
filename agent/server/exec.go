package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/internal/outbuf"
	"github.com/sandlot/sandlot/agent/internal/proc"
	"github.com/sandlot/sandlot/agent/kernels"
	"github.com/sandlot/sandlot/errdefs"
)

const (
	// pipeGrace is how long output may keep flowing after the process
	// exited (background jobs holding the pipe). Then the pipe is closed.
	pipeGrace = 200 * time.Millisecond
)

// running is one exec in flight.
type running struct {
	p    *proc.Process
	argv []string
	cwd  string
	tag  string

	pty bool // stdin is the terminal's master: EOF is ^D, resize works

	mu    sync.Mutex // guards stdin
	stdin *os.File   // nil once closed
}

type procTable struct {
	mu    sync.Mutex
	procs map[int]*running
}

func newProcTable() *procTable { return &procTable{procs: map[int]*running{}} }

func (t *procTable) add(r *running) {
	t.mu.Lock()
	t.procs[r.p.Pid] = r
	t.mu.Unlock()
}

func (t *procTable) del(pid int) {
	t.mu.Lock()
	delete(t.procs, pid)
	t.mu.Unlock()
}

func (t *procTable) get(pid int) *running {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.procs[pid]
}

func (t *procTable) list() []agent.Process {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]agent.Process, 0, len(t.procs))
	for _, r := range t.procs {
		out = append(out, agent.Process{PID: r.p.Pid, Argv: r.argv, Cwd: r.cwd, Tag: r.tag})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// resolve makes p absolute against the home directory.
func (s *Server) resolve(p string) string { return resolveIn(s.cfg.Home, p) }

// resolveIn makes p absolute against home.
func resolveIn(home, p string) string {
	if p == "" {
		return home
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = filepath.Join(home, p[1:])
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(home, p)
	}
	return filepath.Clean(p)
}

func mergeEnv(base []string, extra map[string]string) []string {
	if len(extra) == 0 {
		return base
	}
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[k]; !ok {
			env = append(env, kv)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		f := filepath.Join(dir, name)
		if st, err := os.Stat(f); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return f, nil
		}
	}
	return "", exec.ErrNotFound
}

// exec runs one process to completion. out receives start and output
// events when p.Stream is set.
func (s *Server) exec(ctx context.Context, p agent.ExecParams, out func(agent.OutputEvent)) (*agent.ExecResult, error) {
	start := time.Now()
	var argv []string
	switch {
	case len(p.Argv) > 0 && p.Shell != "":
		return nil, errf(errdefs.CodeInvalidArgument, "exec: set argv or shell, not both")
	case len(p.Argv) > 0:
		argv = append([]string(nil), p.Argv...)
	case p.Shell != "":
		sh := s.bash
		if sh == "" {
			sh = "/bin/sh"
		}
		argv = []string{sh, "-c", p.Shell}
	default:
		return nil, errf(errdefs.CodeInvalidArgument, "exec: argv or shell is required")
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, errf(errdefs.CodeInvalidArgument, "exec: bad environment variable name %q", k)
		}
	}
	who, err := s.account(p.User)
	if err != nil {
		return nil, err
	}
	timeout := kernels.Timeout(p.TimeoutMs)
	env := mergeEnv(who.env(s.baseEnv()), p.Env)
	path, err := lookPath(argv[0], env)
	if err != nil {
		return nil, errf(errdefs.CodeNotFound, "exec: %s: command not found", argv[0])
	}
	argv0 := argv[0]
	argv[0] = path
	cwd := resolveIn(who.home, p.Cwd)
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return nil, errf(errdefs.CodeNotFound, "exec: working directory %s does not exist", cwd)
	}

	sio, pr, err := startProcess(append([]string{path}, argv[1:]...), argv0, p.Pty, cwd, env, who)
	if err != nil {
		return nil, err
	}
	inW, outR, errR := sio.inW, sio.outR, sio.errR
	argv[0] = argv0
	r := &running{p: pr, argv: argv, cwd: cwd, tag: p.Tag, stdin: inW, pty: p.Pty != nil}
	s.procs.add(r)
	detached := false // the process outlives this call (detach.go)
	defer func() {
		if !detached {
			s.procs.del(pr.Pid)
		}
	}()

	var emitMu sync.Mutex // keeps events of both streams whole and ordered per stream
	emit := func(ev agent.OutputEvent) {
		if p.Stream && out != nil {
			emitMu.Lock()
			out(ev)
			emitMu.Unlock()
		}
	}
	var sink *outSink
	if p.Detach {
		// The sink orders and serializes the events itself, and keeps
		// them once the call's connection is gone.
		sink = newOutSink(func(ev agent.OutputEvent) {
			if p.Stream && out != nil {
				out(ev)
			}
		})
		emit = sink.emit
	}
	emit(agent.OutputEvent{Stream: agent.Start, PID: pr.Pid})

	// Stdin is written by its own goroutine so a process that never reads
	// cannot block us.
	if p.Stdin != "" || (!p.KeepStdin && p.Pty == nil) {
		go func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.stdin == nil {
				return
			}
			if p.Stdin != "" {
				_, _ = io.WriteString(r.stdin, p.Stdin)
			}
			if !p.KeepStdin && p.Pty == nil {
				r.stdin.Close()
				r.stdin = nil
			}
		}()
	}

	stdout, stderr := outbuf.New(p.MaxOutput), outbuf.New(p.MaxOutput)
	var wg sync.WaitGroup
	pump := func(f *os.File, ob *outbuf.Buffer, stream string) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if kept := ob.Write(buf[:n]); kept != "" {
					emit(agent.OutputEvent{Stream: stream, Data: kept})
				}
			}
			if err != nil {
				break
			}
		}
		if tail := ob.Flush(); tail != "" {
			emit(agent.OutputEvent{Stream: stream, Data: tail})
		}
	}
	if p.Pty != nil {
		// One terminal stream; the master reads EIO once the last
		// holder of the terminal is gone, which ends the pump.
		wg.Add(1)
		go pump(outR, stdout, agent.Pty)
	} else {
		wg.Add(2)
		go pump(outR, stdout, agent.Stdout)
		go pump(errR, stderr, agent.Stderr)
	}

	// A negative TimeoutMs has no timer: the process runs until it exits,
	// is signalled, its call is cancelled or the sandbox ends.
	deadline := time.Time{}
	if p.TimeoutMs >= 0 {
		deadline = start.Add(timeout)
	}
	// finish waits for the pipes and builds the result once the process
	// is done.
	finish := func(timedOut bool) *agent.ExecResult {
		// Let the pipes drain; background jobs that keep them open are cut off.
		pumped := make(chan struct{})
		go func() { wg.Wait(); close(pumped) }()
		select {
		case <-pumped:
		case <-time.After(pipeGrace):
			_ = outR.SetReadDeadline(time.Now())
			if errR != nil {
				_ = errR.SetReadDeadline(time.Now())
			}
			<-pumped
		}
		r.mu.Lock()
		if r.stdin != nil && r.stdin != outR {
			r.stdin.Close()
		}
		r.stdin = nil
		r.mu.Unlock()
		outR.Close()
		if errR != nil {
			errR.Close()
		}

		st := pr.Status()
		res := &agent.ExecResult{
			PID:        pr.Pid,
			TimedOut:   timedOut,
			Stdout:     stdout.String(),
			Stderr:     stderr.String(),
			Truncated:  stdout.Truncated() || stderr.Truncated(),
			DurationMs: time.Since(start).Milliseconds(),
		}
		switch {
		case st.Exited():
			res.ExitCode = st.ExitStatus()
		case st.Signaled():
			res.ExitCode = 128 + int(st.Signal())
			res.Signal = signalName(st.Signal())
		}
		return res
	}
	timedOut, ended := waitProcess(ctx, pr, deadline)
	if !ended && sink != nil && !errors.Is(context.Cause(ctx), errCallCancelled) {
		// The connection dropped: the process runs on, detached, for an
		// exec.attach from the next host connection.
		detached = true
		sink.detach()
		s.detached.add(pr.Pid, sink)
		go func() {
			timedOut, _ := waitProcess(context.Background(), pr, deadline)
			res := finish(timedOut)
			s.procs.del(pr.Pid)
			sink.finish(res)
			s.detached.ended(pr.Pid)
		}()
		return nil, errf(errdefs.CodeUnavailable, "exec %d detached: its connection dropped", pr.Pid)
	}
	if !ended {
		_ = pr.SignalGroup(syscall.SIGKILL)
		<-pr.Done()
	}
	return finish(timedOut), nil
}

// startProcess starts argv (argv0 is its name in errors) with fresh
// pipes, or a terminal of size pty.
func startProcess(argv []string, argv0 string, pty *agent.PtySize, cwd string, env []string, who *account) (*stdio, *proc.Process, error) {
	sio, err := openStdio(pty, who.cred)
	if err != nil {
		return nil, nil, err
	}
	pr, err := proc.Start(argv, proc.Attr{
		Dir:   cwd,
		Env:   env,
		Files: sio.child,
		Ctty:  pty != nil,
		Cred:  who.cred,
	})
	sio.closeChild()
	if err != nil {
		sio.closeParent()
		cat := errdefs.CodeInternal
		switch {
		case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES):
			cat = errdefs.CodeNotFound
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM):
			// The sandbox's pids or memory limit is full (a fork bomb's
			// leftovers, say): the caller's fault, and it may pass.
			cat = errdefs.CodeResourceExhausted
		}
		return nil, nil, errf(cat, "exec %s: %v", argv0, err)
	}
	return sio, pr, nil
}

// waitProcess waits for pr to end, killing it at deadline (zero: none). It
// reports ended false when ctx ended first, the process still running.
func waitProcess(ctx context.Context, pr *proc.Process, deadline time.Time) (timedOut, ended bool) {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-pr.Done():
		return false, true
	case <-expired:
		_ = pr.SignalGroup(syscall.SIGKILL)
		<-pr.Done()
		return true, true
	case <-ctx.Done():
		return false, false
	}
}

var signals = map[string]syscall.Signal{
	"SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL, "SIGINT": syscall.SIGINT,
	"SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT, "SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2, "SIGSTOP": syscall.SIGSTOP, "SIGCONT": syscall.SIGCONT,
}

func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return sig.String()
}

func (s *Server) signal(p agent.SignalParams) error {
	name := strings.ToUpper(p.Signal)
	if name == "SIGWINCH" || name == "WINCH" {
		return s.resize(p)
	}
	if name == "" {
		name = "SIGTERM"
	}
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig, ok := signals[name]
	if !ok {
		return errf(errdefs.CodeInvalidArgument, "unknown signal %q", p.Signal)
	}
	r := s.procs.get(p.PID)
	if r == nil {
		return errf(errdefs.CodeNotFound, "no running process %d", p.PID)
	}
	if err := r.p.SignalGroup(sig); err != nil && err != syscall.ESRCH {
		return errf(errdefs.CodeInternal, "signal %d: %v", p.PID, err)
	}
	return nil
}

func (s *Server) stdin(ctx context.Context, p agent.StdinParams) error {
	r := s.procs.get(p.PID)
	if r == nil {
		return errf(errdefs.CodeNotFound, "no running process %d", p.PID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stdin == nil {
		return errf(errdefs.CodeFailedPrecondition, "stdin of process %d is closed", p.PID)
	}
	if p.Data != "" {
		deadline := time.Now().Add(10 * time.Second)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = r.stdin.SetWriteDeadline(deadline)
		if _, err := io.WriteString(r.stdin, p.Data); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return errf(errdefs.CodeDeadlineExceeded, "process %d is not reading its stdin", p.PID)
			}
			return errf(errdefs.CodeFailedPrecondition, "write stdin of %d: %v", p.PID, err)
		}
	}
	if p.EOF && r.pty {
		// A terminal's end of input is ^D; its master stays open.
		_, _ = io.WriteString(r.stdin, "\x04")
	} else if p.EOF {
		r.stdin.Close()
		r.stdin = nil
	}
	return nil
}

// lineReader splits frames for the agent side (same bounds as the host).
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

var errTooLarge = errors.New("frame too large")

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

func (lr *lineReader) next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	for {
		line, err := lr.r.ReadSlice('\n')
		if err == nil && len(lr.buf) == 0 {
			return line[:len(line)-1], nil
		}
		lr.buf = append(lr.buf, line...)
		if len(lr.buf) > lr.max+1 {
			return nil, errTooLarge
		}
		if err == nil {
			return lr.buf[:len(lr.buf)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}
