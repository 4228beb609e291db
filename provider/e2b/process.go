package e2b

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	pb "github.com/sandlot/sandlot/e2bwire/process"
	"github.com/sandlot/sandlot/errdefs"
)

var signalStatus = regexp.MustCompile(`^signal: (.+)$`)

// signalName is the name (SIGKILL) of the signal envd's status says in
// Go's words ("killed"), as a local sandbox reports it; a word that is no
// signal's comes back as it is.
func signalName(word string) string {
	for s := syscall.Signal(1); s < 65; s++ {
		if s.String() == word {
			if name := unix.SignalName(s); name != "" {
				return name
			}
		}
	}
	return word
}

// Exec implements contexts.Sandbox with envd's Process.Start.
func (s *Sandbox) Exec(ctx context.Context, p agent.ExecParams, out contexts.OutputFunc) (*agent.ExecResult, error) {
	s.touch()
	if p.Pty != nil {
		return nil, fmt.Errorf("exec on a terminal is not supported by the e2b provider: %w", errdefs.ErrFailedPrecondition)
	}
	if p.User != "" {
		ctx = agent.WithUser(ctx, p.User) // headerTransport sends it
	}
	cfg := &pb.ProcessConfig{Envs: s.callEnv(p.Env)}
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
	timeout := runTimeout(p.TimeoutMs) // negative: none, as the agent reads it
	needStdin := p.KeepStdin || p.Stdin != ""
	req := &pb.StartRequest{Process: cfg, Stdin: &needStdin}
	if p.Tag != "" {
		req.Tag = &p.Tag
	}
	start := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		cancel()
		rctx, cancel = context.WithTimeout(ctx, timeout)
	}
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
				res.Signal = signalName(m[1])
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
			// Killed at its deadline: the status a local sandbox reports
			// for it (the shell's 128+9), so callers see one answer.
			res.ExitCode, res.Signal = 128+9, "SIGKILL"
		} else {
			return nil, rpcError("exec", err)
		}
	}
	// The server may end the process at the deadline just before the
	// client's own deadline fires.
	if !res.TimedOut && res.Signal != "" && (rctx.Err() != nil || timeout > 0 && time.Since(start) >= timeout) && ctx.Err() == nil {
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
