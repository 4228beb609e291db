package e2bcompat

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandlot/sandlot/agent"
	fspb "github.com/sandlot/sandlot/api/e2bcompat/envd/filesystem"
	"github.com/sandlot/sandlot/api/e2bcompat/envd/filesystem/filesystemconnect"
	pb "github.com/sandlot/sandlot/api/e2bcompat/envd/process"
	"github.com/sandlot/sandlot/api/e2bcompat/envd/process/processconnect"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
)

// keepaliveEvery is how often a process stream sends a keepalive event when
// nothing else was sent (the SDKs ask for 50 s; proxies want less).
const keepaliveEvery = 20 * time.Second

// maxExec bounds a process started without a Connect deadline.
const maxExec = time.Hour

func (h *Handler) envdMux() http.Handler {
	mux := http.NewServeMux()
	// Every Connect message is bounded before and after decompression, and
	// the whole body before it is read: a small gzip body must not expand
	// into the daemon's memory.
	limit := h.cfg.MaxMessageBytes
	opts := connect.WithHandlerOptions(
		connect.WithReadMaxBytes(int(limit)),
		connect.WithCompression(compressionGzip,
			func() connect.Decompressor { return &boundedGzip{limit: limit + 1} },
			func() connect.Compressor { return gzip.NewWriter(nil) }),
	)
	bodyLimit := limit + limit/64 + 1024 // gzip of incompressible data, envelope
	p, ph := processconnect.NewProcessHandler(&processService{h: h}, opts)
	mux.Handle(p, http.MaxBytesHandler(ph, bodyLimit))
	f, fh := filesystemconnect.NewFilesystemHandler(&filesystemService{h: h}, opts)
	mux.Handle(f, http.MaxBytesHandler(fh, bodyLimit))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /files", h.readFile)
	mux.HandleFunc("POST /files", h.writeFiles)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: "no route " + r.Method + " " + r.URL.Path})
	})
	return mux
}

const compressionGzip = "gzip"

// boundedGzip is a gzip Decompressor that fails once it has produced more
// than limit bytes. Connect stops reading at its own limit, but then drains
// the rest of the stream to report the full size; without this bound that
// drain would inflate a whole bomb, costing CPU though not memory.
type boundedGzip struct {
	zr    *gzip.Reader
	n     int64
	limit int64
}

var errInflated = errors.New("decompressed message is too large")

func (d *boundedGzip) Read(p []byte) (int, error) {
	if d.zr == nil {
		return 0, io.ErrUnexpectedEOF
	}
	if d.n >= d.limit {
		return 0, errInflated
	}
	if rest := d.limit - d.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := d.zr.Read(p)
	d.n += int64(n)
	return n, err
}

func (d *boundedGzip) Close() error {
	if d.zr == nil {
		return nil
	}
	return d.zr.Close()
}

func (d *boundedGzip) Reset(r io.Reader) error {
	d.n = 0
	if d.zr == nil {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		d.zr = zr
		return nil
	}
	return d.zr.Reset(r)
}

// use runs fn with the guarded sandbox of the request's context, never a
// fresh one (CreateOptions.ContextID). When that context is no longer live
// (killed, expired, its sandbox lost) it fails with unavailable, which the
// SDKs read as "sandbox not running", as E2B's edge answers.
func (h *Handler) use(ctx context.Context, ref *sandboxRef, fn func(ctx context.Context, sb contexts.Sandbox) error) error {
	called := false
	err := h.cfg.Manager.Use(ctx, ref.rec.Identity, CreateOptions{ContextID: ref.rec.ID}, func(ctx context.Context, rec *contexts.Record, sb contexts.Sandbox) error {
		called = true
		if rec.ID != ref.rec.ID {
			return sandboxGone(ref.rec.ID)
		}
		return fn(ctx, sb)
	})
	if err != nil && !called && errors.Is(err, errdefs.ErrNotFound) {
		return sandboxGone(ref.rec.ID)
	}
	return err
}

// sandboxGone is the error of a call on a sandbox that ended under it.
func sandboxGone(id string) error {
	return fmt.Errorf("sandbox %s is not running anymore: %w", id, errdefs.ErrUnavailable)
}

// connectError maps an errdefs category to its Connect code (the names are
// the same); uncategorised errors become internal without their text.
func connectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	var code connect.Code
	if e := code.UnmarshalText([]byte(errdefs.CodeOf(err))); e != nil {
		code = connect.CodeInternal
	}
	return connect.NewError(code, errors.New(errdefs.PublicMessage(err)))
}

// processService implements envd's process.Process.
type processService struct {
	processconnect.UnimplementedProcessHandler
	h *Handler
}

var _ processconnect.ProcessHandler = (*processService)(nil)

func (s *processService) List(ctx context.Context, _ *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	ref := sandboxFrom(ctx)
	var list []agent.Process
	err := s.h.use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
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
func (s *processService) pid(ctx context.Context, ref *sandboxRef, sel *pb.ProcessSelector) (int, error) {
	if sel == nil {
		return 0, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector is required"))
	}
	if _, ok := sel.Selector.(*pb.ProcessSelector_Tag); !ok {
		return int(sel.GetPid()), nil
	}
	var found int
	err := s.h.use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
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
	ref := sandboxFrom(ctx)
	pid, err := s.pid(ctx, ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	in := req.Msg.GetInput()
	if _, ok := in.GetInput().(*pb.ProcessInput_Pty); ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("pty is not supported"))
	}
	err = s.h.use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		return sb.Stdin(ctx, agent.StdinParams{PID: pid, Data: string(in.GetStdin())})
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

func (s *processService) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	ref := sandboxFrom(ctx)
	pid, err := s.pid(ctx, ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	err = s.h.use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		return sb.Stdin(ctx, agent.StdinParams{PID: pid, EOF: true})
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

func (s *processService) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	ref := sandboxFrom(ctx)
	pid, err := s.pid(ctx, ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	sig := "SIGTERM"
	if req.Msg.GetSignal() == pb.Signal_SIGNAL_SIGKILL {
		sig = "SIGKILL"
	}
	err = s.h.use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		return sb.Signal(ctx, agent.SignalParams{PID: pid, Signal: sig})
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

func (s *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	ref := sandboxFrom(ctx)
	if req.Msg.Pty != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("pty is not supported by sandlot"))
	}
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
		TimeoutMs: maxExec.Milliseconds(),
	}
	if dl, ok := ctx.Deadline(); ok {
		params.TimeoutMs = max(time.Until(dl).Milliseconds(), 1)
	}
	p := s.h.procs.start(ref.rec.ID)
	sub := p.subscribe()
	defer p.unsubscribe(sub)
	// The process outlives this stream (E2B semantics: a disconnected
	// command keeps running and can be re-attached with Connect).
	go s.h.run(context.WithoutCancel(ctx), ref, p, params)
	return pump(ctx, sub, func(ev *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: ev}) })
}

func (s *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	ref := sandboxFrom(ctx)
	pid, err := s.pid(ctx, ref, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	p := s.h.procs.get(ref.rec.ID, pid)
	if p == nil {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", pid))
	}
	sub := p.subscribe()
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

// run executes one process and publishes its events to p.
func (h *Handler) run(ctx context.Context, ref *sandboxRef, p *proc, params agent.ExecParams) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(params.TimeoutMs)*time.Millisecond+10*time.Second)
	defer cancel()
	var res *agent.ExecResult
	err := h.use(ctx, ref, func(ctx context.Context, sb contexts.Sandbox) error {
		var err error
		res, err = sb.Exec(ctx, params, func(ev agent.OutputEvent) {
			switch ev.Stream {
			case agent.Start:
				h.procs.started(p, ev.PID)
				p.publish(startEvent(ev.PID))
			case agent.Stdout:
				p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stdout{Stdout: []byte(ev.Data)}}}})
			case agent.Stderr:
				p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: &pb.ProcessEvent_DataEvent{Output: &pb.ProcessEvent_DataEvent_Stderr{Stderr: []byte(ev.Data)}}}})
			}
		})
		return err
	})
	if err != nil {
		p.finish(nil, connectError(err))
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

// procTable tracks processes started through this handler so Connect can
// re-attach to them. Keyed by sandbox id and pid.
type procTable struct {
	mu    sync.Mutex
	procs map[string]*proc
}

func newProcTable() *procTable { return &procTable{procs: map[string]*proc{}} }

func (t *procTable) start(sid string) *proc { return &proc{sid: sid, subs: map[*subscriber]bool{}} }

func (t *procTable) started(p *proc, pid int) {
	p.mu.Lock()
	p.pid = pid
	p.mu.Unlock()
	t.mu.Lock()
	t.procs[p.sid+"/"+strconv.Itoa(pid)] = p
	t.mu.Unlock()
}

func (t *procTable) get(sid string, pid int) *proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.procs[sid+"/"+strconv.Itoa(pid)]
}

func (t *procTable) remove(p *proc) {
	p.mu.Lock()
	key := p.sid + "/" + strconv.Itoa(p.pid)
	p.mu.Unlock()
	t.mu.Lock()
	if t.procs[key] == p {
		delete(t.procs, key)
	}
	t.mu.Unlock()
}

// proc fans one process's events out to its subscribers.
type proc struct {
	sid string

	mu   sync.Mutex
	pid  int
	subs map[*subscriber]bool
	done bool
	end  *pb.ProcessEvent
	err  error
}

func (p *proc) hasStarted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid != 0
}

func (p *proc) subscribe() *subscriber {
	s := &subscriber{wake: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		if p.end != nil {
			s.queue = append(s.queue, p.end)
		}
		s.done, s.err = true, p.err
		return s
	}
	p.subs[s] = true
	return s
}

func (p *proc) unsubscribe(s *subscriber) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
}

func (p *proc) publish(ev *pb.ProcessEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.subs {
		s.push(ev, false, nil)
	}
}

func (p *proc) finish(end *pb.ProcessEvent, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.end, p.err = true, end, err
	for s := range p.subs {
		s.push(end, true, err)
	}
}

// maxQueuedOutput bounds the output bytes queued for one subscriber (one
// Start or Connect stream) that reads slower than its process writes.
const maxQueuedOutput = 4 << 20

// eventOverhead is what one queued event costs beyond its output bytes.
const eventOverhead = 64

// subscriber is one stream's queue of a process's events. The sandbox's
// output callback never blocks on a slow client, so the queue is bounded
// instead: past maxQueuedOutput the oldest queued output is dropped, and
// the stream says so where the gap is (a stderr line) and at the end (the
// end event's error). The newest output, the tail, is always delivered.
type subscriber struct {
	wake chan struct{}

	mu      sync.Mutex
	queue   []*pb.ProcessEvent
	bytes   int64 // output bytes (plus overhead) in queue
	dropped int64 // output bytes dropped since the last take
	lost    int64 // output bytes dropped in all
	done    bool
	err     error
}

func eventSize(ev *pb.ProcessEvent) int64 {
	d := ev.GetData()
	if d == nil {
		return 0
	}
	return int64(len(d.GetStdout())+len(d.GetStderr())+len(d.GetPty())) + eventOverhead
}

func (s *subscriber) push(ev *pb.ProcessEvent, done bool, err error) {
	s.mu.Lock()
	if ev != nil {
		size := eventSize(ev)
		s.queue = append(s.queue, ev)
		s.bytes += size
		s.shed()
	}
	if done {
		s.done, s.err = true, err
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// shed drops the oldest output events until the queue is within bounds.
// Events without output (start, end) are kept. Precondition: s.mu held.
func (s *subscriber) shed() {
	if s.bytes <= maxQueuedOutput {
		return
	}
	kept := s.queue[:0]
	for i, ev := range s.queue {
		size := eventSize(ev)
		if size == 0 || s.bytes <= maxQueuedOutput || i == len(s.queue)-1 {
			kept = append(kept, ev)
			continue
		}
		s.bytes -= size
		s.dropped += size - eventOverhead
		s.lost += size - eventOverhead
	}
	clear(s.queue[len(kept):])
	s.queue = kept
}

// take returns the queued events, preceded by a notice of the output
// dropped before them, if any.
func (s *subscriber) take() ([]*pb.ProcessEvent, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue, s.bytes = nil, 0
	if s.dropped > 0 {
		note := fmt.Sprintf("\n[sandlot: %d bytes of output dropped here: the client read slower than the process wrote]\n", s.dropped)
		q = append([]*pb.ProcessEvent{{Event: &pb.ProcessEvent_Data{Data: &pb.ProcessEvent_DataEvent{
			Output: &pb.ProcessEvent_DataEvent_Stderr{Stderr: []byte(note)}}}}}, q...)
		s.dropped = 0
	}
	if s.done && s.lost > 0 {
		q = withLossNote(q, s.lost)
		s.lost = 0
	}
	return q, s.done, s.err
}

// withLossNote records lost output bytes on the end event in q (a copy;
// other subscribers share the event).
func withLossNote(q []*pb.ProcessEvent, lost int64) []*pb.ProcessEvent {
	for i, ev := range q {
		end := ev.GetEnd()
		if end == nil {
			continue
		}
		c := proto.Clone(end).(*pb.ProcessEvent_EndEvent)
		note := fmt.Sprintf("output incomplete: %d bytes dropped because the client read too slowly", lost)
		if c.Error != nil && *c.Error != "" {
			note = *c.Error + "; " + note
		}
		c.Error = &note
		q[i] = &pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: c}}
	}
	return q
}

// filesystemService implements envd's filesystem.Filesystem.
type filesystemService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	h *Handler
}

var _ filesystemconnect.FilesystemHandler = (*filesystemService)(nil)

func entryInfo(fi *agent.FileInfo) *fspb.EntryInfo {
	e := &fspb.EntryInfo{
		Name:         fi.Name,
		Path:         fi.Path,
		Size:         fi.Size,
		Mode:         fi.Mode,
		Owner:        fi.Owner,
		Group:        fi.Group,
		ModifiedTime: timestamppb.New(time.UnixMilli(fi.ModTime)),
	}
	mode := fs.FileMode(fi.Mode & 0o777)
	switch fi.Type {
	case "file":
		e.Type = fspb.FileType_FILE_TYPE_FILE
	case "dir":
		e.Type = fspb.FileType_FILE_TYPE_DIRECTORY
		mode |= fs.ModeDir
	case "symlink":
		e.Type = fspb.FileType_FILE_TYPE_SYMLINK
		mode |= fs.ModeSymlink
		if fi.Target != "" {
			e.SymlinkTarget = &fi.Target
		}
	}
	e.Permissions = mode.String()
	if e.Name == "" {
		e.Name = path.Base(fi.Path)
	}
	return e
}

func (s *filesystemService) Stat(ctx context.Context, req *connect.Request[fspb.StatRequest]) (*connect.Response[fspb.StatResponse], error) {
	var fi *agent.FileInfo
	err := s.h.use(ctx, sandboxFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		var err error
		fi, err = sb.Stat(ctx, req.Msg.GetPath())
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.StatResponse{Entry: entryInfo(fi)}), nil
}

func (s *filesystemService) MakeDir(ctx context.Context, req *connect.Request[fspb.MakeDirRequest]) (*connect.Response[fspb.MakeDirResponse], error) {
	var fi *agent.FileInfo
	err := s.h.use(ctx, sandboxFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		if _, err := sb.Stat(ctx, req.Msg.GetPath()); err == nil {
			return fmt.Errorf("path %s already exists: %w", req.Msg.GetPath(), errdefs.ErrAlreadyExists)
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		var err error
		fi, err = sb.Mkdir(ctx, req.Msg.GetPath())
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.MakeDirResponse{Entry: entryInfo(fi)}), nil
}

func (s *filesystemService) Move(ctx context.Context, req *connect.Request[fspb.MoveRequest]) (*connect.Response[fspb.MoveResponse], error) {
	var fi *agent.FileInfo
	err := s.h.use(ctx, sandboxFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		var err error
		fi, err = sb.Move(ctx, agent.MoveParams{From: req.Msg.GetSource(), To: req.Msg.GetDestination()})
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.MoveResponse{Entry: entryInfo(fi)}), nil
}

func (s *filesystemService) ListDir(ctx context.Context, req *connect.Request[fspb.ListDirRequest]) (*connect.Response[fspb.ListDirResponse], error) {
	var list []agent.FileInfo
	err := s.h.use(ctx, sandboxFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		fi, err := sb.Stat(ctx, req.Msg.GetPath())
		if err != nil {
			return err
		}
		if fi.Type != "dir" {
			return fmt.Errorf("path %s is not a directory: %w", req.Msg.GetPath(), errdefs.ErrInvalidArgument)
		}
		list, err = sb.List(ctx, agent.ListParams{Path: req.Msg.GetPath(), Depth: int(max(req.Msg.GetDepth(), 1))})
		return err
	})
	if err != nil {
		return nil, connectError(err)
	}
	out := &fspb.ListDirResponse{Entries: []*fspb.EntryInfo{}}
	for i := range list {
		out.Entries = append(out.Entries, entryInfo(&list[i]))
	}
	return connect.NewResponse(out), nil
}

func (s *filesystemService) Remove(ctx context.Context, req *connect.Request[fspb.RemoveRequest]) (*connect.Response[fspb.RemoveResponse], error) {
	err := s.h.use(ctx, sandboxFrom(ctx), func(ctx context.Context, sb contexts.Sandbox) error {
		if _, err := sb.Stat(ctx, req.Msg.GetPath()); err != nil {
			return err
		}
		return sb.Remove(ctx, agent.RemoveParams{Path: req.Msg.GetPath(), Recursive: true})
	})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&fspb.RemoveResponse{}), nil
}
