package envd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat/core"
	"github.com/sandlot/sandlot/contexts"
	pb "github.com/sandlot/sandlot/e2bwire/process"
	"github.com/sandlot/sandlot/e2bwire/process/processconnect"
	"github.com/sandlot/sandlot/errdefs"
)

// keepaliveEvery is how often a process stream sends a keepalive event when
// nothing else was sent (the SDKs ask for 50 s; proxies want less).
const keepaliveEvery = 20 * time.Second

// agentMaxTimeout is the longest timer the agent arms for an exec; a
// longer deadline is kept here instead (the call is cancelled at it).
const agentMaxTimeout = 10 * time.Minute

// processService implements envd's process.Process.
type processService struct {
	processconnect.UnimplementedProcessHandler
	h *Handler
}

var _ processconnect.ProcessHandler = (*processService)(nil)

func (s *processService) List(ctx context.Context, _ *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	ref := core.RefFrom(ctx)
	var list []agent.Process
	err := s.h.edge.Use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		var err error
		list, err = sb.Processes(ctx)
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	out := &pb.ListResponse{}
	for _, p := range list {
		cfg := &pb.ProcessConfig{Envs: map[string]string{}}
		if len(p.Argv) > 0 {
			cfg.Cmd, cfg.Args = p.Argv[0], p.Argv[1:]
		}
		if p.Cwd != "" {
			cfg.Cwd = &p.Cwd
		}
		info := &pb.ProcessInfo{Config: cfg, Pid: uint32(p.PID)}
		if p.Tag != "" {
			info.Tag = &p.Tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// pid resolves a selector (pid or tag).
func (s *processService) pid(ctx context.Context, ref *core.Ref, sel *pb.ProcessSelector) (int, error) {
	if sel == nil {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector is required"))
	}
	if _, ok := sel.Selector.(*pb.ProcessSelector_Tag); !ok {
		return int(sel.GetPid()), nil
	}
	var found int
	err := s.h.edge.Use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		list, err := sb.Processes(ctx)
		for _, p := range list {
			if p.Tag == sel.GetTag() {
				found = p.PID
			}
		}
		return err
	})
	if err != nil {
		return 0, connectError(err)
	}
	if found == 0 {
		return 0, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", sel.GetTag()))
	}
	return found, nil
}

func (s *processService) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	ref := core.RefFrom(ctx)
	pid, err := s.pid(ctx, ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := s.input(ctx, ref, pid, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// input writes one ProcessInput to the stdin of process pid.
func (s *processService) input(ctx context.Context, ref *core.Ref, pid int, in *pb.ProcessInput) error {
	data := in.GetStdin()
	if pty, ok := in.GetInput().(*pb.ProcessInput_Pty); ok {
		data = pty.Pty
	}
	err := s.h.edge.Use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		return sb.Stdin(ctx, agent.StdinParams{PID: pid, Data: string(data)})
	})
	return connectError(err)
}

// StreamInput takes a start event naming the process, then data events
// written to its stdin in order (keepalives are skipped). The stream's end
// does not close stdin: CloseStdin does, as on envd.
func (s *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	ref := core.RefFrom(ctx)
	pid := 0
	for stream.Receive() {
		msg := stream.Msg()
		switch ev := msg.GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			if pid != 0 {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input: a second start event"))
			}
			p, err := s.pid(ctx, ref, ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			pid = p
		case *pb.StreamInputRequest_Data:
			if pid == 0 {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input: data before the start event"))
			}
			if err := s.input(ctx, ref, pid, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

// ptySize checks a terminal size from the wire.
func ptySize(sz *pb.PTY_Size) (*agent.PtySize, error) {
	if sz.GetCols() == 0 || sz.GetRows() == 0 || sz.GetCols() > 4096 || sz.GetRows() > 4096 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("pty size %dx%d: cols and rows must be 1 to 4096", sz.GetCols(), sz.GetRows()))
	}
	return &agent.PtySize{Cols: uint16(sz.GetCols()), Rows: uint16(sz.GetRows())}, nil
}

// Update resizes a process's terminal (pty.resize).
func (s *processService) Update(ctx context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	ref := core.RefFrom(ctx)
	pid, err := s.pid(ctx, ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetPty() == nil {
		return connect.NewResponse(&pb.UpdateResponse{}), nil
	}
	size, err := ptySize(req.Msg.GetPty().GetSize())
	if err != nil {
		return nil, err
	}
	err = s.h.edge.Use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		return sb.Signal(ctx, agent.SignalParams{PID: pid, Signal: "SIGWINCH", Cols: size.Cols, Rows: size.Rows})
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}

func (s *processService) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	ref := core.RefFrom(ctx)
	pid, err := s.pid(ctx, ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	err = s.h.edge.Use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		return sb.Stdin(ctx, agent.StdinParams{PID: pid, EOF: true})
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

func (s *processService) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	ref := core.RefFrom(ctx)
	pid, err := s.pid(ctx, ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	sig := "SIGTERM"
	if req.Msg.GetSignal() == pb.Signal_SIGNAL_SIGKILL {
		sig = "SIGKILL"
	}
	err = s.h.edge.Use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		return sb.Signal(ctx, agent.SignalParams{PID: pid, Signal: sig})
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

func (s *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	ref := core.RefFrom(ctx)
	pc := req.Msg.GetProcess()
	if pc.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	params := agent.ExecParams{
		Argv:      append([]string{pc.GetCmd()}, pc.GetArgs()...),
		Env:       pc.GetEnvs(),
		Cwd:       pc.GetCwd(),
		KeepStdin: req.Msg.GetStdin(),
		Tag:       req.Msg.GetTag(),
		Stream:    true,
		TimeoutMs: -1, // no timer in the agent
		User:      agent.UserOf(ctx),
		// The process outlives this daemon: after a restart Connect
		// attaches to it again (reattach).
		Detach: true,
	}
	if pty := req.Msg.GetPty(); pty != nil {
		// A terminal: one output stream (pty events), input through
		// SendInput's pty field, resized by Update.
		size, err := ptySize(pty.GetSize())
		if err != nil {
			return err
		}
		params.Pty, params.KeepStdin = size, true
	}
	// The command's timeout is the stream's Connect deadline (the SDK's
	// timeoutMs); without one (timeoutMs: 0) it runs until it exits, is
	// killed or the sandbox ends, as on E2B.
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline && time.Until(dl) <= agentMaxTimeout {
		params.TimeoutMs = max(time.Until(dl).Milliseconds(), 1)
	}
	p := s.h.procs.start(ref.Rec.ID)
	sub := p.subscribe()
	defer p.unsubscribe(sub)
	// The process outlives this stream (E2B semantics: a disconnected
	// command keeps running and can be re-attached with Connect).
	runCtx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if hasDeadline {
		end := dl // the agent's timer is off: the deadline kills it
		if params.TimeoutMs > 0 {
			end = dl.Add(10 * time.Second) // the agent's timer ends it first, with its result
		}
		runCtx, cancel = context.WithDeadline(runCtx, end)
	}
	go func() {
		defer cancel()
		s.h.run(runCtx, ref, p, params)
	}()
	return pump(ctx, sub, func(ev *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: ev}) })
}

func (s *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	ref := core.RefFrom(ctx)
	pid, err := s.pid(ctx, ref, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	p := s.h.procs.get(ref.Rec.ID, pid)
	var sub *subscriber
	if p == nil {
		var err error
		if p, sub, err = s.h.reattach(ctx, ref, pid); err != nil {
			if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrFailedPrecondition) {
				return s.notAttachable(ctx, ref, pid)
			}
			return connectError(err)
		}
	} else {
		sub = p.subscribe()
	}
	defer p.unsubscribe(sub)
	if err := stream.Send(&pb.ConnectResponse{Event: startEvent(pid)}); err != nil {
		return err
	}
	return pump(ctx, sub, func(ev *pb.ProcessEvent) error {
		if ev.GetStart() != nil {
			return nil
		}
		return stream.Send(&pb.ConnectResponse{Event: ev})
	})
}

// notAttachable explains a Connect to a pid this handler has no output
// fan-out for: not_found when the sandbox runs no such process, else
// failed_precondition (a process started outside the E2B API, by a /v1
// call, or by another daemon serving the same store).
func (s *processService) notAttachable(ctx context.Context, ref *core.Ref, pid int) error {
	listed := false
	err := s.h.edge.Use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		list, err := sb.Processes(ctx)
		for _, p := range list {
			listed = listed || p.PID == pid
		}
		return err
	})
	if err != nil {
		return connectError(err)
	}
	if !listed {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", pid))
	}
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d was not started through this server's E2B API, so its output cannot be attached; it can still be signalled and sent input", pid))
}

// run executes one process and publishes its events to p.
// ctx bounds it (a deadline past the agent's timer; none: unbounded).
// Its health check rides on the exec's request (contexts.ProbeInCall):
// the ping before it was a round trip as long as the call.
func (h *Handler) run(ctx context.Context, ref *core.Ref, p *proc, params agent.ExecParams) {
	h.follow(contexts.ProbeInCall(ctx), ref, p, func(ctx context.Context, sb contexts.Sandbox, out contexts.OutputFunc) (*agent.ExecResult, error) {
		return sb.Exec(ctx, params, out)
	}, nil)
}

// reattach follows a process this daemon did not start: one started
// through the E2B API by an earlier daemon process (before a restart),
// which the agent kept running, detached (agent.ExecParams.Detach). It
// returns the process's fan-out once the agent took the attach, or the
// agent's error (not_found: nothing detached by that pid). Two Connects
// at once share one attach. The caller's subscription is made before the
// attach starts: the agent replays what the process printed while no one
// was attached, and its end if it has ended, right after the start event,
// so a subscription made once reattach returned missed them (a command
// that ended while the daemon was down connected with its exit code and
// no output).
func (h *Handler) reattach(ctx context.Context, ref *core.Ref, pid int) (*proc, *subscriber, error) {
	p, created := h.procs.getOrAdd(ref.Rec.ID, pid)
	sub := p.subscribe()
	if !created {
		return p, sub, nil
	}
	attached := make(chan error, 1)
	go h.follow(context.WithoutCancel(ctx), ref, p, func(ctx context.Context, sb contexts.Sandbox, out contexts.OutputFunc) (*agent.ExecResult, error) {
		return contexts.AttachExec(ctx, sb, agent.AttachParams{PID: pid}, out)
	}, attached)
	select {
	case err := <-attached:
		if err != nil {
			p.unsubscribe(sub)
			return nil, nil, err
		}
		return p, sub, nil
	case <-ctx.Done():
		p.unsubscribe(sub)
		return nil, nil, ctx.Err()
	}
}

// follow runs call (an exec or an attach), publishing its events to p,
// and ends p with its result. attached, when set, gets nil at the start
// event or the call's error if it fails before one.
func (h *Handler) follow(ctx context.Context, ref *core.Ref, p *proc, call func(context.Context, contexts.Sandbox, contexts.OutputFunc) (*agent.ExecResult, error), attached chan<- error) {
	var res *agent.ExecResult
	var sawStart atomic.Bool
	err := h.edge.Use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		var err error
		res, err = call(ctx, sb, func(ev agent.OutputEvent) {
			switch ev.Stream {
			case agent.Start:
				h.procs.started(p, ev.PID)
				if sawStart.CompareAndSwap(false, true) && attached != nil {
					attached <- nil
				}
				p.publish(startEvent(ev.PID))
			case agent.Stdout:
				p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stdout{Stdout: []byte(ev.Data)}}}})
			case agent.Pty:
				p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Pty{Pty: []byte(ev.Data)}}}})
			case agent.Stderr:
				p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stderr{Stderr: []byte(ev.Data)}}}})
			}
		})
		return err
	})
	if err != nil && attached != nil && !sawStart.Load() {
		attached <- err // before any start: nothing to follow
		p.finish(nil, connectError(err))
		h.procs.remove(p)
		return
	}
	if err != nil {
		if errors.Is(err, errdefs.ErrUnavailable) {
			// The sandbox went away under the command (killed, past its
			// end): say so in E2B's terms, without sandlot's internal
			// sandbox id.
			err = fmt.Errorf("sandbox %s was killed or reached its end of life while the command ran: %w", ref.Rec.ID, errdefs.ErrUnavailable)
			if h.edge.GoneUnder(ctx, ref) {
				// Its streams drop their connections (pump), as E2B's edge
				// does when a sandbox's VM is gone.
				err = errSandboxEnded
			}
		}
		if err != errSandboxEnded {
			err = connectError(err)
		}
		p.finish(nil, err)
		h.procs.remove(p)
		return
	}
	if !p.hasStarted() {
		h.procs.started(p, res.PID)
		p.publish(startEvent(res.PID))
	}
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(res.ExitCode), Exited: true, Status: "exit status " + strconv.Itoa(res.ExitCode)}
	switch {
	case res.TimedOut:
		msg := "process timed out"
		end.Error = &msg
		end.Status = "signal: killed"
		if end.ExitCode == 0 {
			end.ExitCode = -1
		}
	case res.Signal != "":
		end.Status = "signal: " + res.Signal
		if end.ExitCode == 0 {
			end.ExitCode = -1
		}
	}
	p.finish(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}}, nil)
	h.procs.remove(p)
}

// errSandboxEnded marks a command's end that came from its sandbox ending
// under it (killed, or past its end).
var errSandboxEnded = errors.New("the sandbox ended")

func startEvent(pid int) *pb.ProcessEvent {
	return &pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: uint32(pid)}}}
}

// pump sends a subscriber's events until the end event, the process
// error, or the client going away; it adds keepalives while idle.
func pump(ctx context.Context, sub *subscriber, send func(*pb.ProcessEvent) error) error {
	tick := time.NewTicker(keepaliveEvery)
	defer tick.Stop()
	for {
		evs, done, err := sub.take()
		for _, ev := range evs {
			if e := send(ev); e != nil {
				return e
			}
		}
		if done {
			if errors.Is(err, errSandboxEnded) {
				// The SDK reads a dropped stream as "the connection
				// terminated", finds the sandbox gone (/health 502) and
				// throws E2B's "sandbox was killed or reached its end of
				// life" TimeoutError.
				panic(http.ErrAbortHandler)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return connectError(ctx.Err())
		case <-sub.wake:
		case <-tick.C:
			if e := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); e != nil {
				return e
			}
		}
	}
}
